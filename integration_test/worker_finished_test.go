package integrationtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestWorkerOnFinished: every claimed operation is reported once, with the
// outcome the pool recorded for it (matching Stats), how long its handler
// ran, the time from claim to recording, and, on its first claim, how long
// it waited since it was recorded by the repository's clock.
func TestWorkerOnFinished(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const n = 30
		for i := range n {
			recordOp(t, e, "caller", fmt.Sprintf("op-%d", i))
		}
		e.clock.Advance(3 * time.Second) // they have waited 3 s when claimed
		var mu sync.Mutex
		var got []worker.Finished
		pool, err := worker.New(e.repo, worker.Config{Concurrency: 4,
			Handler: func(_ context.Context, op *models.Operation) worker.Result {
				time.Sleep(2 * time.Millisecond)
				i, _ := strconv.Atoi(strings.TrimPrefix(op.OperationID, "op-"))
				switch i % 3 {
				case 0:
					return worker.Commit(nil, nil, nil)
				case 1:
					return worker.Retry("network", nil)
				}
				return worker.Dead("validation", nil)
			},
			OnFinished: func(f worker.Finished) {
				mu.Lock()
				got = append(got, f)
				mu.Unlock()
			}})
		require.NoError(t, err)
		stats := runPool(t, pool, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == n
		})
		byOutcome := map[string]int64{}
		seen := map[string]bool{}
		for _, f := range got {
			byOutcome[f.Outcome]++
			require.False(t, seen[f.Fence.OperationID], "reported once: %s", f.Fence)
			seen[f.Fence.OperationID] = true
			require.Equal(t, "crm", f.ConnectorName)
			require.Equal(t, "owner", f.OwnerDID)
			require.True(t, f.FirstClaim)
			require.Equal(t, 3*time.Second, f.Pickup)
			require.GreaterOrEqual(t, f.Handler, 2*time.Millisecond)
			require.GreaterOrEqual(t, f.ClaimToFinish, f.Handler)
		}
		require.Equal(t, map[string]int64{worker.OutcomeCommitted: stats.Committed, worker.OutcomeRetried: stats.Retried,
			worker.OutcomeDead: stats.Dead}, byOutcome)
		require.Equal(t, map[string]int64{worker.OutcomeCommitted: 10, worker.OutcomeRetried: 10, worker.OutcomeDead: 10}, byOutcome)

		// A retried operation's next claim is not a first claim.
		e.clock.Advance(time.Hour)
		got = nil
		stats = runPool(t, pool, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 10
		})
		for _, f := range got {
			require.False(t, f.FirstClaim, f.Fence.String())
			require.Zero(t, f.Pickup)
		}
	})
}
