package integrationtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// Was: Finished.Pickup / connstore.worker.pickup.duration is "the time
// from an operation's record to its FIRST claim". An operation whose lease
// was released at shutdown (its handler cancelled, nothing counted) is
// reported as a first claim again on its next claim, so one operation
// feeds the pickup histogram twice, the second sample inflated by the
// whole time it sat released.
func TestWorkerPickupReportedOnceAfterRelease(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "op-1")
		e.clock.Advance(time.Second)
		var mu sync.Mutex
		var got []worker.Finished
		onFinished := func(f worker.Finished) {
			mu.Lock()
			got = append(got, f)
			mu.Unlock()
		}
		started := make(chan struct{}, 1)
		pool, err := worker.New(e.repo, worker.Config{Concurrency: 1, ShutdownGrace: 10 * time.Millisecond,
			Handler: func(ctx context.Context, op *models.Operation) worker.Result {
				started <- struct{}{}
				<-ctx.Done() // still running at shutdown: released
				return worker.Retry("shutdown", nil)
			}, OnFinished: onFinished})
		require.NoError(t, err)
		runPool(t, pool, func() bool { return len(started) == 1 })
		mu.Lock()
		require.Len(t, got, 1)
		require.Equal(t, worker.OutcomeReleased, got[0].Outcome)
		require.True(t, got[0].FirstClaim)
		mu.Unlock()

		e.clock.Advance(time.Hour)
		pool, err = worker.New(e.repo, worker.Config{Concurrency: 1,
			Handler:    func(context.Context, *models.Operation) worker.Result { return worker.Commit(nil, nil, nil) },
			OnFinished: onFinished})
		require.NoError(t, err)
		runPool(t, pool, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 2
		})
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, worker.OutcomeCommitted, got[1].Outcome)
		require.False(t, got[1].FirstClaim, "op-1's first claim was already reported (pickup %v); now pickup %v",
			got[0].Pickup, got[1].Pickup)
	})
}
