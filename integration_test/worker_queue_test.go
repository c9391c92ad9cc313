package integrationtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestWorkerQueuedNotStartedAfterCancel: operations claimed but waiting for
// a running slot when Run's context ends are released at once, never
// started — neither while the running handler finishes within its grace,
// nor after Run returned, when a handler that ignored its context finally
// returns.
func TestWorkerQueuedNotStartedAfterCancel(t *testing.T) {
	t.Parallel()
	for _, ignores := range []bool{false, true} {
		name := map[bool]string{false: "handler finishes in its grace", true: "handler ignores its context"}[ignores]
		t.Run(name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, e *env) {
				seedDue(t, e, 8)
				var calls atomic.Int64
				started, finish := make(chan struct{}), make(chan struct{})
				// The handler returns only when the test says so: in the
				// second case after Run has given up on it (a short grace).
				// The flush has a second: the queued operations' release must
				// land however loaded the machine (with 50 ms it sometimes did
				// not, and they were left to their leases).
				grace, flush := 5*time.Second, 5*time.Second
				if ignores {
					grace, flush = 50*time.Millisecond, time.Second
				}
				pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 1, BatchSize: 8,
					ShutdownGrace: grace, FlushTimeout: flush,
					Handler: func(context.Context, *models.Operation) worker.Result {
						if calls.Add(1) == 1 {
							close(started)
						}
						<-finish
						return worker.Commit(nil, nil, nil)
					}})
				require.NoError(t, err)
				c, cancel := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- pool.Run(c) }()
				<-started
				require.Eventually(t, func() bool { return pool.Stats().Claimed == 8 }, 10*time.Second, time.Millisecond)
				cancel()
				if ignores {
					require.NoError(t, <-ran) // abandoned at the bound
					close(finish)
				} else {
					time.Sleep(50 * time.Millisecond)
					close(finish)
					require.NoError(t, <-ran)
				}
				time.Sleep(100 * time.Millisecond) // a queued handler would start now
				require.EqualValues(t, 1, calls.Load(), "only the handler running at cancellation ever ran")
				stats := pool.Stats()
				// Every lease but the running handler's is given back. A claim
				// already on its way when ctx ended completes (its leases must
				// not be lost) and can take the seven just released; it starts
				// no handler and releases them again: 14 leases of 7 rows.
				require.EqualValues(t, stats.Claimed-1, stats.Released, "queued operations are released at cancellation")
				require.EqualValues(t, 7, count(t, e.db, &models.Operation{}, "state = ? AND lease_token IS NULL",
					models.OperationAttempted))
				if !ignores {
					require.EqualValues(t, 1, stats.Committed)
				}
			})
		})
	}
}

// TestWorkerLastResultRecordedAtShutdown: a result returned as the pool
// shuts down is recorded, never lost between the handler and the
// recorder (repeated, to meet the moment the pool goes idle).
func TestWorkerLastResultRecordedAtShutdown(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for i := range 25 {
			require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_operation").Error)
			seedDue(t, e, 1)
			started := make(chan struct{})
			pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 1, BatchSize: 1,
				ShutdownGrace: time.Nanosecond, Handler: func(ctx context.Context, _ *models.Operation) worker.Result {
					close(started)
					<-ctx.Done()
					return worker.Commit(nil, nil, nil) // a commit is recorded even after cancellation
				}})
			require.NoError(t, err)
			c, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- pool.Run(c) }()
			<-started
			cancel()
			require.NoError(t, <-ran)
			stats := pool.Stats()
			require.EqualValues(t, 1, stats.Committed, "round %d: %+v", i, stats)
			require.Zero(t, stats.Unrecorded, "round %d", i)
			require.EqualValues(t, 1, stateCount(t, e, models.OperationCommitted), "round %d", i)
		}
	})
}

// TestWorkerHeartbeatOutageCancelsHandler: while heartbeats cannot reach
// the database (the operation table is locked by another transaction), a
// handler is cancelled before its lease runs out — after that another
// instance may claim the operation and two handlers would run it at once —
// and the loss is counted once.
func TestWorkerHeartbeatOutageCancelsHandler(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 1)
		const leaseFor = 800 * time.Millisecond
		var startedAt atomic.Int64
		cancelledAfter := make(chan time.Duration, 1)
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 1, BatchSize: 1, LeaseFor: leaseFor,
			HeartbeatEvery: 200 * time.Millisecond, ShutdownGrace: time.Nanosecond, FlushTimeout: 200 * time.Millisecond,
			Handler: func(ctx context.Context, _ *models.Operation) worker.Result {
				startedAt.Store(time.Now().UnixNano())
				select {
				case <-ctx.Done():
					cancelledAfter <- time.Since(time.Unix(0, startedAt.Load()))
				case <-time.After(5 * time.Second):
					cancelledAfter <- -1
				}
				return worker.Commit(nil, nil, nil)
			}})
		require.NoError(t, err)
		c, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- pool.Run(c) }()
		require.Eventually(t, func() bool { return startedAt.Load() != 0 }, 10*time.Second, time.Millisecond)

		// Another handle takes the table: heartbeats (and recording) wait.
		other := openDSN(t, e.kind, e.dsn)
		blocker := other.Begin()
		require.NoError(t, blocker.Error)
		if e.kind == pgKind {
			require.NoError(t, blocker.Exec("LOCK TABLE kubun_connector_operation IN EXCLUSIVE MODE").Error)
		} else {
			require.NoError(t, blocker.Exec("UPDATE kubun_connector_sync_state SET status = status").Error)
		}
		after := <-cancelledAfter
		blocker.Rollback()
		require.Positive(t, after, "the handler ran on with its lease unrenewable")
		require.Less(t, after, leaseFor, "cancelled before the lease ran out")
		cancel()
		require.NoError(t, <-ran)
		require.EqualValues(t, 1, pool.Stats().LeaseLost, "the loss is counted once")
	})
}
