package integrationtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// pageDoc is a checkpoint {"page":n}.
type pageDoc struct {
	Page int `json:"page"`
}

// nextPage is a recompute that adds one to the checkpoint's page.
func nextPage(t *testing.T) repository.RecomputeFunc {
	return func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		var doc pageDoc
		if cur != nil {
			require.NoError(t, cur.Checkpoint.Decode(&doc))
		}
		doc.Page++
		return repository.SyncProgressResult{Checkpoint: mustJSON(t, doc), LastSyncedAt: "t", EntityCount: int64(doc.Page)}, nil
	}
}

func storedPage(t *testing.T, repo *repository.Repository) int {
	t.Helper()
	st, err := repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
	require.NoError(t, err)
	var doc pageDoc
	require.NoError(t, st.Checkpoint.Decode(&doc))
	return doc.Page
}

// resetTo is SetSyncState's reset of crm/o to page n (the seed's upsert:
// the version does not move).
func resetTo(t *testing.T, repo *repository.Repository, n int) error {
	in := baseState(t)
	in.Checkpoint = mustJSON(t, pageDoc{Page: n})
	return repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, in)
}

// TestProgressResetNotUndone: instance A updates progress, instance B
// resets the row with SetSyncState (no version bump), A updates again: the
// update starts from B's reset, with the progress cache on and off. A guard
// on version and incarnation alone passes A's write and undoes the reset.
func TestProgressResetNotUndone(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, cache := range []int{0, -1} {
			_, a := instance(t, e, repository.Options{ProgressCache: cache})
			_, b := instance(t, e, repository.Options{ProgressCache: cache})
			update := func() error {
				return a.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
					Recompute: nextPage(t)})
			}
			require.NoError(t, b.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}))
			require.NoError(t, update())
			require.NoError(t, update())
			require.Equal(t, 2, storedPage(t, b))
			require.NoError(t, resetTo(t, b, 100))
			require.NoError(t, update())
			require.Equal(t, 101, storedPage(t, b), "cache %d: the reset is kept", cache)
		}
	})
}

// TestProgressResetReadThenWrite: a reset landing between an update's read
// and its write (the recompute runs in between) makes that write lose its
// guard: the update retries from the reset, with the cache on and off.
func TestProgressResetReadThenWrite(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, cache := range []int{0, -1} {
			_, a := instance(t, e, repository.Options{ProgressCache: cache})
			_, b := instance(t, e, repository.Options{ProgressCache: cache})
			require.NoError(t, b.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}))
			require.NoError(t, resetTo(t, b, 1))
			var calls atomic.Int32
			err := a.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
				Recompute: func(c context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
					if calls.Add(1) == 1 {
						require.NoError(t, resetTo(t, b, 100)) // between the read and the write
					}
					return nextPage(t)(c, cur)
				}})
			require.NoError(t, err)
			require.Equal(t, int32(2), calls.Load(), "cache %d: the first write lost its guard", cache)
			require.Equal(t, 101, storedPage(t, b), "cache %d", cache)
		}
	})
}

// TestProgressResetDuringRemember: the same instance's SetSyncState lands
// right after a cached write's UPDATE, before the write is remembered; the
// next update starts from the reset, not from the remembered write.
func TestProgressResetDuringRemember(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		db, a := instance(t, e, repository.Options{})
		update := func() error {
			return a.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
				Recompute: nextPage(t)})
		}
		var armed atomic.Bool
		require.NoError(t, db.Callback().Raw().After("gorm:raw").Register("test:reset_after_cas", func(tx *gorm.DB) {
			if strings.HasPrefix(tx.Statement.SQL.String(), "UPDATE kubun_connector_sync_state") && armed.CompareAndSwap(true, false) {
				require.NoError(t, resetTo(t, a, 100))
			}
		}))
		require.NoError(t, update())
		require.NoError(t, update()) // remembered
		armed.Store(true)
		require.NoError(t, update()) // page 3, then the reset to 100 before it is remembered
		require.False(t, armed.Load(), "the reset ran")
		require.Equal(t, 100, storedPage(t, a))
		require.NoError(t, update())
		require.Equal(t, 101, storedPage(t, a))
	})
}

// TestProgressRecomputeErrorOnRememberedFallsBack: a recompute that refuses
// the remembered state (the stored row has moved on) is not the call's
// error: the update reads the row and recomputes from what is stored.
func TestProgressRecomputeErrorOnRememberedFallsBack(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, a := instance(t, e, repository.Options{})
		_, b := instance(t, e, repository.Options{})
		stale := errors.New("page 2 is stale")
		update := func() error {
			return a.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
				Recompute: func(c context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
					var doc pageDoc
					if cur != nil {
						require.NoError(t, cur.Checkpoint.Decode(&doc))
					}
					if doc.Page == 2 {
						return repository.SyncProgressResult{}, stale
					}
					return nextPage(t)(c, cur)
				}})
		}
		require.NoError(t, update())
		require.NoError(t, update()) // page 2, remembered
		require.NoError(t, resetTo(t, b, 100))
		require.NoError(t, update(), "the remembered page 2 is refused; the stored page 100 is not")
		require.Equal(t, 101, storedPage(t, b))

		require.NoError(t, resetTo(t, b, 2))
		require.ErrorIs(t, update(), stale, "an error on the stored row is the call's error")
	})
}
