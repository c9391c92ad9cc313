package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// run is one Run's state.
type run struct {
	pool     *Pool
	slots    chan struct{} // one token per held lease: running, queued or being recorded
	running  chan struct{} // one token per running handler
	results  chan done
	handlers sync.WaitGroup

	mu   sync.Mutex
	held map[repository.Fence]*job // leased and not yet recorded
}

// fetch claims while ctx lives, as many operations as there are free slots
// (at most BatchSize), and starts a handler for each on work.
func (r *run) fetch(ctx, claims, work context.Context) {
	// The claim itself runs on claims, which outlives the handlers' work
	// context: a claim cancelled mid-commit could lease rows and lose the
	// reply, leaving leases nobody holds. What it returns after work ended
	// starts handlers that see their context done, and is released.
	cfg := r.pool.cfg
	last := time.Time{}
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
		ops, err := r.pool.repo.ClaimOperations(claims, repository.ClaimParams{Limit: free, LeaseFor: cfg.LeaseFor,
			ConnectorName: cfg.ConnectorName, OwnerDID: cfg.OwnerDID})
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("connstore worker: claim failed", "err", err)
		}
		r.pool.stats.claimed.Add(int64(len(ops)))
		for i := range ops {
			r.start(work, ops[i])
		}
		for range free - len(ops) {
			<-r.slots // give back the slots nothing was claimed for
		}
		if len(ops) == 0 {
			sleep(ctx, cfg.PollInterval)
		}
	}
}

// start runs the handler for op in its own goroutine; op holds one slot.
func (r *run) start(work context.Context, op models.Operation) {
	hctx, cancel := context.WithCancel(work)
	j := &job{op: op, fence: repository.FenceOf(&op), cancel: cancel}
	r.mu.Lock()
	r.held[j.fence] = j
	r.mu.Unlock()
	r.handlers.Go(func() {
		r.running <- struct{}{}
		res := r.call(hctx, j)
		<-r.running
		r.results <- done{job: j, result: res, interrupted: hctx.Err() != nil && res.kind != kindCommit}
	})
}

// call runs the handler; a panic is a retryable failure, not a dead pool.
func (r *run) call(ctx context.Context, j *job) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			r.pool.cfg.Logger.Error("connstore worker: handler panicked", "operation", j.fence.String(), "panic", fmt.Sprint(v))
			res = Retry("panic", nil)
		}
	}()
	op := j.op
	return r.pool.cfg.Handler(ctx, &op)
}

// complete records outcomes in batches: whatever arrived within FlushEvery
// of the first, or a slot's worth, in one statement per kind.
func (r *run) complete(ctx context.Context) {
	for first := range r.results {
		batch := []done{first}
		timer := time.NewTimer(r.pool.cfg.FlushEvery)
	gather:
		for len(batch) < cap(r.slots) {
			select {
			case d, ok := <-r.results:
				if !ok {
					break gather
				}
				batch = append(batch, d)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		r.recordBatch(ctx, batch)
	}
}

// heartbeat extends the leases of every held operation until ctx ends; an
// operation whose lease was lost has its handler's context cancelled.
func (r *run) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.pool.cfg.HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		fences := make([]repository.Fence, 0, len(r.held))
		for f := range r.held {
			fences = append(fences, f)
		}
		r.mu.Unlock()
		if len(fences) == 0 {
			continue
		}
		out, err := r.pool.repo.HeartbeatOperations(ctx, fences, r.pool.cfg.LeaseFor)
		if err != nil {
			r.pool.cfg.Logger.Warn("connstore worker: heartbeat failed", "err", err)
			continue
		}
		for _, o := range out {
			if o.Err != nil {
				r.pool.stats.leaseLost.Add(1)
				r.mu.Lock()
				if j := r.held[o.Fence]; j != nil {
					j.cancel()
				}
				r.mu.Unlock()
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
