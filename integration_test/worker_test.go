package integrationtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// realRepo is a repository on e's database with the real clock, for tests
// where leases must expire in real time.
func realRepo(t *testing.T, e *env) *repository.Repository {
	t.Helper()
	repo, err := repository.New(e.db, repository.Options{})
	require.NoError(t, err)
	return repo
}

// seedDue records n operations due now (by the real clock).
func seedDue(t *testing.T, e *env, n int) {
	t.Helper()
	now := time.Now().UnixMilli()
	rows := make([]models.Operation, n)
	for i := range rows {
		rows[i] = dbtest.OpRow(i, models.OperationAttempted, &now, now)
	}
	seedOps(t, e, rows)
}

// runPool runs a pool until stop reports true, then cancels it, and returns
// its stats after Run returned.
func runPool(t *testing.T, pool *worker.Pool, stop func() bool) worker.Stats {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(c) }()
	require.Eventually(t, stop, 30*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	return pool.Stats()
}

func stateCount(t *testing.T, e *env, state string) int64 {
	return count(t, e.db, &models.Operation{}, "state = ?", state)
}

// TestWorkerRecordsResults: each handler result lands through the batched
// writes; a panicking handler is a retryable failure and the pool goes on.
func TestWorkerRecordsResults(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 40)
		status := int64(503)
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 4, BatchSize: 8,
			Handler: func(_ context.Context, op *models.Operation) worker.Result {
				var i int
				fmt.Sscanf(op.OperationID, "op-%d", &i)
				switch i % 5 {
				case 0:
					return worker.Commit(models.StrPtr("doc-"+op.OperationID), nil, models.JSON(`{"ok":true}`))
				case 1:
					return worker.Retry("http", &status)
				case 2:
					return worker.Dead("validation", nil)
				case 3:
					return worker.ReconcileOnly()
				}
				panic("handler bug")
			}})
		require.NoError(t, err)
		stats := runPool(t, pool, func() bool {
			return stateCount(t, e, models.OperationCommitted) == 8 &&
				count(t, e.db, &models.Operation{}, "attempts = 1") == 16 && stateCount(t, e, models.OperationDead) == 8 &&
				stateCount(t, e, models.OperationReconcileOnly) == 8
		})
		require.Equal(t, int64(8), count(t, e.db, &models.Operation{}, "last_kind = ? AND attempts = 1", "panic"))
		require.Equal(t, int64(8), count(t, e.db, &models.Operation{}, "last_http_status = 503"))
		require.Equal(t, int64(8), count(t, e.db, &models.Operation{}, "document_id LIKE ?", "doc-op-%"))
		require.Zero(t, count(t, e.db, &models.Operation{}, "lease_token IS NOT NULL"), "every lease ended")
		require.Equal(t, int64(40), stats.Claimed)
		require.Equal(t, int64(8), stats.Committed)
		require.Equal(t, int64(16), stats.Retried, "8 retries and 8 panics")
		require.Equal(t, int64(8), stats.Panicked)
		require.Equal(t, int64(8), stats.Dead)
		require.Equal(t, int64(8), stats.ReconcileOnly)
		require.Zero(t, stats.Refused+stats.LeaseLost+stats.Unrecorded)
	})
}

// TestWorkerHeartbeatKeepsSlowLease: a handler that runs for several lease
// lengths keeps its lease; nobody else can claim the operation meanwhile,
// and its commit lands.
func TestWorkerHeartbeatKeepsSlowLease(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 1)
		other := realRepo(t, e)
		var stolen atomic.Int64
		// A lease of 1 s beaten every 100 ms: with 300 ms and 50 ms, one
		// stall of the loaded suite's two cores past 250 ms let it lapse.
		pool, err := worker.New(realRepo(t, e), worker.Config{LeaseFor: time.Second, HeartbeatEvery: 100 * time.Millisecond,
			Handler: func(context.Context, *models.Operation) worker.Result {
				for range 30 { // 3 s, three lease lengths
					time.Sleep(100 * time.Millisecond)
					ops, err := other.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
					if err == nil {
						stolen.Add(int64(len(ops)))
					}
				}
				return worker.Commit(nil, nil, nil)
			}})
		require.NoError(t, err)
		stats := runPool(t, pool, func() bool { return stateCount(t, e, models.OperationCommitted) == 1 })
		require.Zero(t, stolen.Load(), "the heartbeat kept the lease")
		require.Equal(t, int64(1), stats.Committed)
		require.Zero(t, stats.LeaseLost)
	})
}

// poolGoroutines counts live goroutines running the worker package's code.
func poolGoroutines() int {
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "connstore/worker.") {
			n++
		}
	}
	return n
}

// TestWorkerHoldsItsBound: with every handler blocked, the pool leases
// exactly Concurrency + 2 × BatchSize operations, the running ones and two
// batches, and no more.
func TestWorkerHoldsItsBound(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 40)
		var running atomic.Int64
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 2, BatchSize: 3, ShutdownGrace: time.Nanosecond,
			PollInterval: time.Millisecond, Handler: func(ctx context.Context, _ *models.Operation) worker.Result {
				running.Add(1)
				<-ctx.Done()
				return worker.Retry("interrupted", nil)
			}})
		require.NoError(t, err)
		leased := func() int64 { return count(t, e.db, &models.Operation{}, "lease_token IS NOT NULL") }
		stats := runPool(t, pool, func() bool {
			if running.Load() != 2 || leased() != 8 {
				return false
			}
			time.Sleep(100 * time.Millisecond) // a pool past its bound would claim again meanwhile
			return leased() == 8
		})
		require.Equal(t, int64(8), stats.Claimed, "2 running + 2 batches of 3")
		require.Equal(t, int64(8), stats.Released)
	})
}

// TestWorkerCancellationReleases: cancelling the pool (a grace of 1 ns) cancels
// running handlers; their operations are released, not failed; and no
// goroutine the pool started is left behind. Not parallel: the goroutine
// count must see this pool alone.
func TestWorkerCancellationReleases(t *testing.T) {
	for _, kind := range []string{pgKind, sqlitekind} {
		e := setup(t, kind)
		seedDue(t, e, 6)
		require.Zero(t, poolGoroutines())
		var running atomic.Int64
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 3, ShutdownGrace: time.Nanosecond,
			Handler: func(ctx context.Context, _ *models.Operation) worker.Result {
				running.Add(1)
				<-ctx.Done()
				return worker.Retry("interrupted", nil)
			}})
		require.NoError(t, err)
		stats := runPool(t, pool, func() bool { return running.Load() == 3 })
		require.Equal(t, stats.Claimed, stats.Released, "every claimed operation, running or queued, is released")
		require.Zero(t, stats.Retried)
		require.Zero(t, count(t, e.db, &models.Operation{}, "lease_token IS NOT NULL"), "held leases are released")
		require.Zero(t, count(t, e.db, &models.Operation{}, "attempts <> 0"), "an interrupted attempt is not a failure")
		require.Zero(t, poolGoroutines(), "Run returned with every goroutine it started ended")
	}
}

// TestWorkerGraceLetsHandlersFinish: within the grace period a running
// handler finishes and its commit is recorded after cancellation.
func TestWorkerGraceLetsHandlersFinish(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 2)
		var running atomic.Int64
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 2, ShutdownGrace: 5 * time.Second,
			Handler: func(ctx context.Context, _ *models.Operation) worker.Result {
				running.Add(1)
				time.Sleep(200 * time.Millisecond)
				return worker.Commit(nil, nil, nil)
			}})
		require.NoError(t, err)
		runPool(t, pool, func() bool { return running.Load() == 2 })
		require.Equal(t, int64(2), stateCount(t, e, models.OperationCommitted))
	})
}
