package worker

import (
	"context"
	"errors"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// complete records outcomes in batches (whatever arrived within FlushEvery
// of the first, up to a slot's worth) until every handler has returned and
// its outcome is recorded, or ctx ends.
func (r *run) complete(ctx context.Context) {
	for {
		var first outcome
		select {
		case first = <-r.results:
		case <-r.idle:
			// No handler runs or will start: record what is left, then stop.
			for {
				select {
				case o := <-r.results:
					r.recordBatch(ctx, r.gather(ctx, o))
				default:
					return
				}
			}
		case <-ctx.Done():
			return
		}
		r.recordBatch(ctx, r.gather(ctx, first))
	}
}

// gather collects the outcomes arriving within FlushEvery of first.
func (r *run) gather(ctx context.Context, first outcome) []outcome {
	batch := []outcome{first}
	timer := time.NewTimer(r.cfg.FlushEvery)
	defer timer.Stop()
	for len(batch) < cap(r.slots) {
		select {
		case o := <-r.results:
			batch = append(batch, o)
		case <-timer.C:
			return batch
		case <-r.idle:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// recordBatch records one batch of outcomes, one batched write per kind,
// each retried past failed statements (a lost connection) until ctx ends;
// the fencing makes a retry of a landed write a replay. Refused results
// are logged here. Then every operation whose write was answered (landed,
// replayed, or refused for its lease) leaves the held set and frees its
// slot.
func (r *run) recordBatch(ctx context.Context, batch []outcome) {
	// Wait out a heartbeat in flight: it may include these operations, and
	// once it is done no later one will (they are finished).
	r.beating.Lock()
	//lint:ignore SA2001 a barrier: waiting for the holder is the point
	r.beating.Unlock()

	var (
		commits  []repository.CommitParams
		failures []repository.FailureParams
		snoozes  []repository.SnoozeParams
		dead     []repository.FinishParams
		rec      []repository.FinishParams
		release  []repository.Fence
	)
	s := &r.pool.stats
	settled := make(map[repository.Fence]string, len(batch)) // fence → outcome label
	for _, o := range batch {
		f := o.job.fence
		if o.act == actDrop {
			settled[f] = OutcomeLeaseLost
		}
		if o.refusal != nil {
			s.refused.Add(1)
			r.cfg.Logger.Error("connstore worker: the handler's result is refused", "operation", f.String(),
				"err", o.refusal, "recorded_as", map[action]string{actDead: OutcomeDead, actFailure: KindInvalidResult}[o.act])
		}
		if o.panicked {
			s.panicked.Add(1)
		}
		if o.timedOut {
			s.timedOut.Add(1)
		}
		switch o.act {
		case actCommit:
			commits = append(commits, o.commit)
		case actFailure:
			failures = append(failures, o.failure)
		case actSnooze:
			snoozes = append(snoozes, o.snooze)
		case actDead:
			dead = append(dead, o.finish)
		case actReconcileOnly:
			rec = append(rec, o.finish)
		case actRelease:
			release = append(release, f)
		}
	}
	refusedCommits := writeAll(ctx, r, settled, "commit", commits, func(p repository.CommitParams) repository.Fence { return p.Fence }, r.pool.repo.CommitOperations, func(o repository.BatchOutcome) string {
		s.committed.Add(1)
		return OutcomeCommitted
	})
	// The store found these commits invalid for their row (its document id).
	for _, f := range refusedCommits {
		dead = append(dead, repository.FinishParams{Fence: f, Kind: KindInvalidResult,
			Message: "the store refused the commit for the stored row (its document id)"})
	}
	writeAll(ctx, r, settled, "record failure", failures, func(p repository.FailureParams) repository.Fence { return p.Fence }, r.pool.repo.RecordOperationFailures, func(o repository.BatchOutcome) string {
		if o.Write.State == models.OperationDead {
			s.dead.Add(1)
			return OutcomeDead
		}
		s.retried.Add(1)
		return OutcomeRetried
	})
	paused := map[repository.Fence]bool{}
	for _, p := range snoozes {
		paused[p.Fence] = p.PauseAccount
	}
	writeAll(ctx, r, settled, "snooze", snoozes, func(p repository.SnoozeParams) repository.Fence { return p.Fence }, r.pool.repo.SnoozeOperations, func(o repository.BatchOutcome) string {
		s.snoozed.Add(1)
		if paused[o.Fence] {
			s.pausedAccounts.Add(1)
		}
		return OutcomeSnoozed
	})
	finish := func(state string) func(context.Context, []repository.FinishParams) ([]repository.BatchOutcome, error) {
		return func(ctx context.Context, ps []repository.FinishParams) ([]repository.BatchOutcome, error) {
			return r.pool.repo.FinishOperationsWith(ctx, ps, state)
		}
	}
	finishFence := func(p repository.FinishParams) repository.Fence { return p.Fence }
	writeAll(ctx, r, settled, "mark dead", dead, finishFence, finish(models.OperationDead), func(repository.BatchOutcome) string { s.dead.Add(1); return OutcomeDead })
	writeAll(ctx, r, settled, "mark reconcile-only", rec, finishFence, finish(models.OperationReconcileOnly),
		func(repository.BatchOutcome) string { s.reconcileOnly.Add(1); return OutcomeReconcileOnly })
	writeAll(ctx, r, settled, "release", release, self, r.pool.repo.ReleaseOperations, func(repository.BatchOutcome) string { s.released.Add(1); return OutcomeReleased })

	// An outcome not settled when ctx ended stays held: giveUp logs it.
	now := time.Now()
	r.mu.Lock()
	freed := 0
	for _, o := range batch {
		if label := settled[o.job.fence]; label != "" {
			r.finished(o.job, label, now)
			delete(r.held, o.job.fence)
			o.job.cancel(nil)
			freed++
		}
	}
	r.mu.Unlock()
	for range freed {
		<-r.slots
	}
	// A finished operation under flow control freed its account's slot:
	// the fetcher, perhaps gated on that account, claims again now.
	for _, o := range batch {
		if o.job.op.Flow {
			select {
			case r.wake <- struct{}{}:
			default:
			}
			break
		}
	}
}

func self(f repository.Fence) repository.Fence { return f }

// writeAll runs one batched write of items, retrying a failed statement
// with backoff until ctx ends, and counts each outcome: landed through
// landed, a lost lease as such. It returns the fences the store refused as
// invalid for their stored row (a commit's document id). A whole call
// refused as invalid (which the pool's own validation should make
// impossible) is split so one item's refusal stays its own.
func writeAll[P any](ctx context.Context, r *run, settled map[repository.Fence]string, what string, items []P, fenceOf func(P) repository.Fence,
	call func(context.Context, []P) ([]repository.BatchOutcome, error), landed func(repository.BatchOutcome) string) []repository.Fence {
	if len(items) == 0 {
		return nil
	}
	var refused []repository.Fence
	delay := 20 * time.Millisecond
	for ctx.Err() == nil {
		out, err := call(ctx, items)
		if errors.Is(err, repository.ErrInvalidInput) {
			if len(items) == 1 {
				r.pool.stats.refused.Add(1)
				r.cfg.Logger.Error("connstore worker: "+what+" refused; its lease will expire", "operation",
					fenceOf(items[0]).String(), "err", err)
				settled[fenceOf(items[0])] = OutcomeRefused
				return nil
			}
			for i := range items {
				refused = append(refused, writeAll(ctx, r, settled, what, items[i:i+1], fenceOf, call, landed)...)
			}
			return refused
		}
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("connstore worker: recording results failed; retrying", "write", what, "err", err)
			}
			sleep(ctx, delay)
			delay = min(2*delay, time.Second)
			continue
		}
		for _, o := range out {
			switch {
			case o.Err == nil:
				settled[o.Fence] = landed(o)
			case errors.Is(o.Err, repository.ErrInvalidInput):
				settled[o.Fence] = OutcomeRefused
				r.pool.stats.refused.Add(1)
				r.cfg.Logger.Error("connstore worker: "+what+" refused by the store", "operation", o.Fence.String(), "err", o.Err)
				refused = append(refused, o.Fence)
			default: // a lost lease, or the row is gone
				settled[o.Fence] = OutcomeLeaseLost
				r.pool.stats.leaseLost.Add(1)
				r.cfg.Logger.Warn("connstore worker: "+what+" not recorded: the lease was lost", "operation",
					o.Fence.String(), "err", o.Err)
			}
		}
		return refused
	}
	return nil
}
