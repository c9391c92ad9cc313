package integrationtest

import (
	"context"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// TestProgressCacheCopiesTheErrorMessage: the progress cache remembers
// the error message the write stored, not the caller's *string: a caller
// that reuses its message variable after the write must not make the next
// recompute see, as the stored error, a message that was never stored.
// (It failed when the cache copied the documents but not the message.)
func TestProgressCacheCopiesTheErrorMessage(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		msg := "page 1 failed"
		write := func(fn repository.RecomputeFunc) {
			require.NoError(t, e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: key, Recompute: fn}))
		}
		// Insert path, then update path: both remember res.Error.
		for i := 0; i < 2; i++ {
			write(func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				return repository.SyncProgressResult{Checkpoint: models.JSON(`{"n":1}`), LastSyncedAt: "t", Error: &msg}, nil
			})
		}
		msg = "some later, never stored message" // the caller reuses its variable

		var seen []string
		write(func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			if cur != nil && cur.Error != nil {
				seen = append(seen, *cur.Error)
			}
			return repository.SyncProgressResult{Checkpoint: models.JSON(`{"n":2}`), LastSyncedAt: "t", Error: cur.Error}, nil
		})
		row, err := e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, "page 1 failed", *row.Error)
		require.Equal(t, []string{"page 1 failed"}, seen, "every recompute is shown the stored message")
	})
}

// TestReview22ScopedProgressKeepsMessage: the scoped (built) CAS path is
// guarded on the stored error as the written-out one is.
func TestReview22ScopedProgressKeepsMessage(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("o"))
		require.NoError(t, err)
		up := func(fn repository.RecomputeFunc) error {
			return scoped.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: key, Recompute: fn})
		}
		require.NoError(t, up(keepError(nil)))
		require.NoError(t, up(keepError(nil)))
		msg := "token revoked"
		_, err = e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{Key: key, Status: models.SyncStatusError, Error: &msg})
		require.NoError(t, err)
		require.NoError(t, up(keepError(nil)))
		row, err := e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, &msg, row.Error)
		// A reset that rewrites only the message (no version bump) between
		// a scoped read and its write must make the write retry.
		calls := 0
		other := "other"
		require.NoError(t, up(keepError(func(cur *repository.SyncProgressCurrent) {
			calls++
			if calls == 1 {
				require.NoError(t, e.repo.SetSyncState(ctx(t), key, repository.SyncStateInput{Checkpoint: cur.Checkpoint, LastSyncedAt: "t",
					EntityCount: 1, Status: models.SyncStatusError, Error: &other, Recovery: cur.Recovery}))
			}
		})))
		row, err = e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, "other", *row.Error)
		require.Equal(t, 2, calls)
	})
}
