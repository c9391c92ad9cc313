package connstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
)

// workTimeout bounds WorkOne when the test's context has no deadline.
const workTimeout = 30 * time.Second

// WorkOne records in (due now on the store's clock, unless in.NotBefore
// says later — then it is never claimed and WorkOne fails), runs handler on
// it through a real worker pool of one, waits until the pool has recorded
// the outcome, stops the pool, and returns the operation as stored and the
// pool's counts. It is the path production takes: validation of the
// handler's result, the lease fence, timeouts and panics included.
//
// The pool claims in due order, so the store should hold no other due
// operation; WorkOne fails the test if the pool works another one first.
func WorkOne(t testing.TB, s *Store, in repository.OperationInput, handler worker.Handler) (*models.Operation, worker.Stats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), workTimeout)
	defer cancel()
	if _, _, err := s.Repo.RecordOperation(ctx, in); err != nil {
		t.Fatalf("connstoretest: record: %v", err)
	}
	pool, err := worker.New(s.Repo, worker.Config{Concurrency: 1, BatchSize: 1, PollInterval: 5 * time.Millisecond,
		FlushEvery: time.Millisecond, DisableListen: true, Handler: handler})
	if err != nil {
		t.Fatalf("connstoretest: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(runCtx) }()
	for settled(pool.Stats()) == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("connstoretest: pool: %v", err)
	}
	stats := pool.Stats()
	if settled(stats) == 0 {
		t.Fatalf("connstoretest: %s/%s was not worked within %s (is it due on the store's clock?)",
			in.CallerDID, in.OperationID, workTimeout)
	}
	if stats.Claimed != 1 {
		t.Fatalf("connstoretest: the pool claimed %d operations; the store holds other due operations", stats.Claimed)
	}
	op, err := s.Repo.GetOperation(context.Background(), repository.OperationKey{CallerDID: in.CallerDID, OperationID: in.OperationID})
	if err != nil {
		t.Fatalf("connstoretest: read back: %v", err)
	}
	return op, stats
}

// settled counts the outcomes the pool recorded or gave up on.
func settled(s worker.Stats) int64 {
	return s.Committed + s.Retried + s.Dead + s.ReconcileOnly + s.Snoozed + s.Released + s.Refused + s.LeaseLost + s.Unrecorded
}
