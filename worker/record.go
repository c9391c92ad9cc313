package worker

import (
	"context"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// recordBatch records one batch of outcomes, one batched write per kind,
// retrying a failed statement (a lost connection) until ctx ends; the
// fencing makes a retry of a landed write a replay. Then the operations
// leave the held set and their lease slots free up.
func (r *run) recordBatch(ctx context.Context, batch []done) {
	var (
		commits   []repository.CommitParams
		failures  []repository.FailureParams
		dead, rec []repository.Fence
		release   []repository.Fence
	)
	for _, d := range batch {
		f, res := d.job.fence, d.result
		switch {
		case d.interrupted:
			release = append(release, f)
		case res.kind == kindCommit:
			commits = append(commits, repository.CommitParams{Fence: f, DocumentID: res.documentID,
				ProviderEtag: res.providerEtag, ResultEntity: res.resultEntity})
		case res.kind == kindDead:
			dead = append(dead, f)
		case res.kind == kindReconcileOnly:
			rec = append(rec, f)
		default: // a retry, or a zero Result: count the failed attempt
			kind := res.failureKind
			if kind == "" {
				kind = "unspecified"
			}
			failures = append(failures, repository.FailureParams{Fence: f, Kind: kind, HTTPStatus: res.httpStatus})
		}
	}
	s := &r.pool.stats
	r.write(ctx, &s.committed, func() ([]repository.BatchOutcome, error) { return r.pool.repo.CommitOperations(ctx, commits) }, len(commits))
	r.write(ctx, &s.failed, func() ([]repository.BatchOutcome, error) { return r.pool.repo.RecordOperationFailures(ctx, failures) }, len(failures))
	r.write(ctx, &s.finished, func() ([]repository.BatchOutcome, error) {
		return r.pool.repo.FinishOperations(ctx, dead, models.OperationDead)
	}, len(dead))
	r.write(ctx, &s.finished, func() ([]repository.BatchOutcome, error) {
		return r.pool.repo.FinishOperations(ctx, rec, models.OperationReconcileOnly)
	}, len(rec))
	r.write(ctx, &s.released, func() ([]repository.BatchOutcome, error) { return r.pool.repo.ReleaseOperations(ctx, release) }, len(release))
	r.mu.Lock()
	for _, d := range batch {
		delete(r.held, d.job.fence)
		d.job.cancel()
	}
	r.mu.Unlock()
	for range batch {
		<-r.slots
	}
}

// write runs one batched write (when it has items), retrying statement
// errors, and counts the operations it landed; refusals count as lost leases.
func (r *run) write(ctx context.Context, landed interface{ Add(int64) int64 }, call func() ([]repository.BatchOutcome, error), n int) {
	if n == 0 {
		return
	}
	for ctx.Err() == nil {
		out, err := call()
		if err != nil {
			r.pool.cfg.Logger.Warn("connstore worker: recording results failed; retrying", "err", err)
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		for _, o := range out {
			if o.Err != nil {
				r.pool.stats.leaseLost.Add(1)
			} else {
				landed.Add(1)
			}
		}
		return
	}
}
