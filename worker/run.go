package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// job is one claimed operation while the pool holds it.
type job struct {
	op     models.Operation
	fence  repository.Fence
	cancel context.CancelCauseFunc
	// finished is set (under run.mu) when the handler returned: from then
	// on the operation is the recorder's and no heartbeat touches it.
	finished bool
	// lost is set (under run.mu) when a heartbeat found the lease lost, or
	// heartbeats failed until the lease ran out.
	lost bool
	// expires is when the lease runs out by this process's clock, as far as
	// it knows: the claim's or the last answered heartbeat's start plus
	// LeaseFor (under run.mu).
	expires time.Time
	// claimedAt is when the claim that leased it was sent, and storeNow
	// the repository's clock then (what created_at is measured against).
	claimedAt, storeNow time.Time
	// ran is how long the handler ran (set when it returned).
	ran time.Duration
}

// run is one Run's state.
type run struct {
	pool    *Pool
	cfg     *Config
	slots   chan struct{}   // one token per held lease: running, queued or being recorded
	running chan struct{}   // one token per running handler
	results chan outcome    // never closed: a late handler's send cannot panic
	wake    chan struct{}   // a recorded operation was announced
	stop    <-chan struct{} // Run's context ended: no handler starts any more

	mu      sync.Mutex
	held    map[repository.Fence]*job // leased and not yet recorded
	active  int                       // handlers started and not returned
	fetched bool                      // no more handlers will start
	idle    chan struct{}             // closed once fetched and active == 0

	// beating is held by a heartbeat from its choice of leases to the end
	// of its write; the recorder passes through it before writing, so a
	// heartbeat never runs for an operation whose result is being recorded
	// (it would be refused and miscounted as a lost lease).
	beating sync.Mutex
}

// Run works until ctx is cancelled, then shuts down and returns nil:
// nothing more is claimed; running handlers have ShutdownGrace to finish,
// then their contexts are cancelled (what they return then is released, a
// commit is still recorded); results are recorded for at most FlushTimeout
// more, whatever the database does, and those not recorded are logged with
// their keys and left to their leases' expiry. Run returns once every
// goroutine it started has ended, except a handler that ignores its
// context, which is abandoned (logged) at that bound. A second Run while
// one is running returns ErrAlreadyRunning.
func (p *Pool) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer p.running.Store(false)
	held := p.cfg.Concurrency + 2*p.cfg.BatchSize
	r := &run{pool: p, cfg: &p.cfg, slots: make(chan struct{}, held), running: make(chan struct{}, p.cfg.Concurrency),
		results: make(chan outcome, held), wake: make(chan struct{}, 1), held: map[repository.Fence]*job{},
		idle: make(chan struct{}), stop: ctx.Done()}
	// work is the handlers' parent context, ended ShutdownGrace after ctx;
	// record carries claims, heartbeats and recording, ended FlushTimeout
	// later. Neither depends on anything but time once ctx has ended.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	record, stopRecord := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecord()
	finished := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { shutdownClock(ctx, finished, p.cfg.ShutdownGrace, p.cfg.FlushTimeout, stopWork, stopRecord) })
	defer bg.Wait()
	defer close(finished)

	beats, stopBeats := context.WithCancel(record)
	defer stopBeats()
	bg.Go(func() { r.heartbeat(beats) })
	if !p.cfg.DisableListen {
		bg.Go(func() { r.listen(ctx) })
	}
	var completer sync.WaitGroup
	completer.Go(func() { r.complete(record) })
	r.fetch(ctx, record, work)
	r.mu.Lock()
	r.fetched = true
	r.checkIdle()
	r.mu.Unlock()
	completer.Wait()
	stopBeats()
	r.giveUp()
	return nil
}

// shutdownClock ends work ShutdownGrace after ctx ends and record
// FlushTimeout after that, unless Run finishes first.
func shutdownClock(ctx context.Context, finished <-chan struct{}, grace, flush time.Duration,
	stopWork context.CancelCauseFunc, stopRecord context.CancelFunc) {
	select {
	case <-ctx.Done():
	case <-finished:
		return
	}
	for _, step := range []struct {
		after time.Duration
		stop  func()
	}{{grace, func() { stopWork(errShutdown) }}, {flush, stopRecord}} {
		t := time.NewTimer(step.after)
		select {
		case <-t.C:
			step.stop()
		case <-finished:
			t.Stop()
			return
		}
	}
}

// giveUp logs every operation still held when recording stopped: a result
// that could not be recorded, or a handler that ignored its context.
func (r *run) giveUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for f, j := range r.held {
		r.pool.stats.unrecorded.Add(1)
		what := "its result could not be recorded"
		if !j.finished {
			what = "its handler ignored cancellation and was abandoned"
		}
		r.cfg.Logger.Error("connstore worker: stopped holding an operation; its lease will expire and it will be re-driven",
			"operation", f.String(), "why", what)
		j.cancel(errShutdown)
	}
	clear(r.held)
}

// checkIdle closes idle once no handler runs and none will start; r.mu held.
func (r *run) checkIdle() {
	if r.fetched && r.active == 0 {
		select {
		case <-r.idle:
		default:
			close(r.idle)
		}
	}
}

// fetch claims while ctx lives, as many operations as there are free slots
// (at most BatchSize), and starts a handler for each on work.
func (r *run) fetch(ctx, claims, work context.Context) {
	// The claim itself runs on claims, which outlives the handlers' work
	// context: a claim cancelled mid-commit could lease rows and lose the
	// reply, leaving leases nobody holds. What it returns after work ended
	// starts handlers that see their context done, and is released.
	cfg := r.cfg
	last := time.Time{}
	failures := 0
	for ctx.Err() == nil {
		select { // wait for one free slot
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		sleep(ctx, time.Until(last.Add(cfg.FetchCooldown))) // let more slots free up
		last = time.Now()
		free := 1
		for free < cfg.BatchSize && len(r.slots) < cap(r.slots) {
			r.slots <- struct{}{}
			free++
		}
		if ctx.Err() != nil {
			for range free {
				<-r.slots
			}
			return
		}
		claimedAt, storeNow := time.Now(), r.pool.repo.Now()
		res, err := r.pool.repo.Claim(claims, repository.ClaimParams{Limit: free, LeaseFor: cfg.LeaseFor,
			ConnectorName: cfg.ConnectorName, OwnerDID: cfg.OwnerDID})
		ops := res.Operations
		r.pool.stats.claimed.Add(int64(len(ops)))
		for i := range ops {
			r.start(work, ops[i], claimedAt, storeNow)
		}
		for range free - len(ops) {
			<-r.slots // give back the slots nothing was claimed for
		}
		switch {
		case err != nil && ctx.Err() == nil:
			// An unreachable database: back off, up to ten polls, so a
			// long outage logs a few lines, not thousands.
			failures++
			cfg.Logger.Warn("connstore worker: claim failed", "err", err, "failures", failures)
			r.pause(ctx, min(cfg.PollInterval<<min(failures, 10), max(10*cfg.PollInterval, 5*time.Second)))
		case len(ops) == 0:
			failures = 0
			wait := cfg.PollInterval
			if res.Throttled {
				r.pool.stats.throttled.Add(1)
			}
			// Gated by flow control: back when the next account can be
			// served (a pause's end, a token), if that is sooner than a poll;
			// a slot freed by this pool's own results wakes it sooner still.
			if !res.NextEligible.IsZero() {
				if d := res.NextEligible.Sub(r.pool.repo.Now()); d < wait {
					wait = max(d, time.Millisecond)
				}
			}
			r.pause(ctx, wait)
		default:
			failures = 0
		}
	}
}

// pause waits d, or until ctx ends or a recorded operation is announced.
func (r *run) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-r.wake:
		r.pool.stats.wakeups.Add(1)
	}
}

// listen wakes fetch when an operation is recorded, until ctx ends;
// reconnecting after a lost connection, giving up where the database
// cannot announce (SQLite: fetch polls).
func (r *run) listen(ctx context.Context) {
	wake := func() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	for ctx.Err() == nil {
		err := r.pool.repo.ListenRecorded(ctx, wake)
		if ctx.Err() != nil || errors.Is(err, repository.ErrListenUnsupported) {
			return
		}
		r.cfg.Logger.Warn("connstore worker: listening for recorded operations failed; polling meanwhile", "err", err)
		sleep(ctx, max(r.cfg.PollInterval, time.Second))
	}
}

// start runs the handler for op in its own goroutine; op holds one slot.
// A handler waiting for a running slot when Run's context ends never
// starts: its operation is released at once, for another instance to take
// (a handler never starts after shutdown began, nor after Run returned).
// The outcome is queued for the recorder before the handler counts as
// returned, so once the pool is idle every outcome is in the queue.
func (r *run) start(work context.Context, op models.Operation, claimedAt, storeNow time.Time) {
	hctx, cancel := context.WithCancelCause(work)
	j := &job{op: op, fence: repository.FenceOf(&op), cancel: cancel, expires: claimedAt.Add(r.cfg.LeaseFor),
		claimedAt: claimedAt, storeNow: storeNow}
	r.mu.Lock()
	r.held[j.fence] = j
	r.active++
	r.mu.Unlock()
	go func() {
		o := outcome{job: j, act: actRelease}
		select {
		case r.running <- struct{}{}:
			if !closed(r.stop) {
				began := time.Now()
				res, panicked, cause := r.call(hctx, j)
				j.ran = time.Since(began) // read by the recorder after the send below
				o = decide(j, res, cause, panicked, time.Now())
			}
			<-r.running
		case <-r.stop:
		}
		r.mu.Lock()
		j.finished = true
		if j.lost {
			// The heartbeat found the lease gone (and counted it): a write
			// would be refused and counted again.
			o = outcome{job: j, act: actDrop}
		}
		r.mu.Unlock()
		r.results <- o // never blocks: the buffer holds one outcome per slot
		r.mu.Lock()
		r.active--
		r.checkIdle()
		r.mu.Unlock()
	}()
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// call runs the handler under its timeout, and reports why its context
// ended, if it did. A panic, in the handler or in HandlerTimeoutFor (user
// code too), is recorded as a retryable failure, not a dead pool, and
// logged with its stack.
func (r *run) call(ctx context.Context, j *job) (res Result, panicked bool, cause error) {
	defer func() {
		if v := recover(); v != nil {
			res, panicked = Result{message: fmt.Sprint(v)}, true
			r.cfg.Logger.Error("connstore worker: handler panicked", "operation", j.fence.String(),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	timeout, err := r.cfg.timeoutFor(&j.op)
	if err != nil {
		return Result{}, false, err // refused as the operation's result
	}
	if timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, timeout, errTimeout)
		defer stop()
	}
	defer func() {
		if ctx.Err() != nil {
			cause = context.Cause(ctx)
		}
	}()
	op := j.op
	return r.cfg.Handler(ctx, &op), false, nil
}

// heartbeat extends the leases of every running handler until ctx ends.
func (r *run) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.cfg.HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.beat(ctx)
	}
}

// beat is one heartbeat: the leases of handlers still running, extended in
// one statement. A refusal is a real loss (no result of those operations
// is being recorded, see beating): its handler's context is cancelled and
// nothing is recorded for it. When heartbeats fail (the database is
// unreachable or slow), a handler whose lease would run out before the
// next heartbeat is cancelled the same way: past that point another
// instance may claim the operation, and two handlers would run it at once.
func (r *run) beat(ctx context.Context) {
	r.beating.Lock()
	defer r.beating.Unlock()
	started := time.Now()
	// A heartbeat answered after the leases it extends ran out is no use:
	// it must answer while there is time to act on its failure, a heartbeat
	// interval before the first of them ends (and gets at least one
	// interval).
	deadline := started.Add(r.cfg.LeaseFor)
	r.mu.Lock()
	fences := make([]repository.Fence, 0, len(r.held))
	for f, j := range r.held {
		if !j.finished && !j.lost {
			fences = append(fences, f)
			deadline = minTime(deadline, j.expires)
		}
	}
	r.mu.Unlock()
	if len(fences) == 0 {
		return
	}
	deadline = maxTime(deadline.Add(-r.cfg.HeartbeatEvery), started.Add(r.cfg.HeartbeatEvery))
	bctx, cancel := context.WithDeadline(ctx, deadline)
	out, err := r.pool.repo.HeartbeatOperations(bctx, fences, r.cfg.LeaseFor)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("connstore worker: heartbeat failed", "err", err)
			r.expire(fences, time.Now().Add(r.cfg.HeartbeatEvery))
		}
		return
	}
	for _, o := range out {
		r.mu.Lock()
		if j := r.held[o.Fence]; j != nil && !j.finished && !j.lost {
			if o.Err == nil {
				j.expires = started.Add(r.cfg.LeaseFor)
			} else {
				r.lose(j, "lease lost; cancelling the handler", o.Err)
			}
		}
		r.mu.Unlock()
	}
}

// expire cancels the handlers among fences whose leases end before next,
// when the next heartbeat is due.
func (r *run) expire(fences []repository.Fence, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fences {
		if j := r.held[f]; j != nil && !j.finished && !j.lost && !next.Before(j.expires) {
			r.lose(j, "lease running out while heartbeats fail; cancelling the handler", nil)
		}
	}
}

// lose marks j's lease lost, counts it once, and cancels its handler;
// r.mu held.
func (r *run) lose(j *job, msg string, err error) {
	j.lost = true
	r.pool.stats.leaseLost.Add(1)
	r.cfg.Logger.Warn("connstore worker: "+msg, "operation", j.fence.String(), "err", err)
	j.cancel(errLeaseLost)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
