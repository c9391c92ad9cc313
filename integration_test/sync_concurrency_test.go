package integrationtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// counterRecompute adds one to the counter kept in the checkpoint and
// mirrors it in entity_count; it is safe for concurrent use.
func counterRecompute(onCall func(cur *repository.SyncProgressCurrent)) repository.RecomputeFunc {
	return func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		if onCall != nil {
			onCall(cur)
		}
		var cp struct{ N int64 }
		if cur != nil {
			if err := cur.Checkpoint.Decode(&cp); err != nil {
				return repository.SyncProgressResult{}, err
			}
		}
		cp.N++
		doc, err := models.NewJSON(cp)
		return repository.SyncProgressResult{Checkpoint: doc, LastSyncedAt: "now", EntityCount: cp.N}, err
	}
}

// TestUpdateProgressNoLostUpdates: 32 writers × 50 increments on one row,
// through two repositories (two processes' progress caches).
func TestUpdateProgressNoLostUpdates(t *testing.T) {
	t.Parallel()
	const writers, increments = 32, 50
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, repository.SyncStateInput{
			LastSyncedAt: "t0", Status: models.SyncStatusSyncing}))
		retries := 1 << 20
		var attempts atomic.Int64
		recompute := counterRecompute(func(*repository.SyncProgressCurrent) { attempts.Add(1) })
		var wg sync.WaitGroup
		errs := make(chan error, writers*increments)
		repos := []*repository.Repository{e.repo, realRepo(t, e)}
		for w := range writers {
			wg.Go(func() {
				for range increments {
					errs <- repos[w%2].UpdateSyncProgress(context.Background(), repository.UpdateSyncProgressParams{
						Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
						Recompute: recompute, MaxRetries: &retries})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(writers*increments), got.EntityCount)
		require.Equal(t, int64(writers*increments), got.Version, "one version bump per successful write")
		require.Equal(t, models.SyncStatusSyncing, got.Status)
		t.Logf("%s: %d attempts for %d writes", e.kind, attempts.Load(), writers*increments)
	})
}

// TestUpdateProgressInsertRace: two writers find no row; one INSERT wins,
// the other's INSERT does nothing, so it reloads and takes the update path.
func TestUpdateProgressInsertRace(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		var (
			barrier sync.WaitGroup
			mu      sync.Mutex
			seen    []*repository.SyncProgressCurrent
		)
		barrier.Add(2)
		recompute := counterRecompute(func(cur *repository.SyncProgressCurrent) {
			mu.Lock()
			seen = append(seen, cur)
			mu.Unlock()
			if cur == nil { // hold both writers on the insert path together
				barrier.Done()
				barrier.Wait()
			}
		})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				errs[i] = e.repo.UpdateSyncProgress(context.Background(), repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: recompute})
			})
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Len(t, seen, 3, "two insert attempts, then one update attempt")
		require.Nil(t, seen[0])
		require.Nil(t, seen[1])
		require.NotNil(t, seen[2])
		require.Equal(t, int64(0), seen[2].Version)
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(2), got.EntityCount, "both writes landed")
		require.Equal(t, int64(1), got.Version, "one insert (v0) and one update (v1)")
		require.Equal(t, models.SyncStatusIdle, got.Status)
	})
}
