package integrationtest

import (
	"context"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// keepError is counterRecompute keeping the stored error message, as the
// README's PageSynced does; onCall runs before it returns.
func keepError(onCall func(cur *repository.SyncProgressCurrent)) repository.RecomputeFunc {
	count := counterRecompute(onCall)
	return func(ctx context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		res, err := count(ctx, cur)
		if cur != nil {
			res.Error = cur.Error
		}
		return res, err
	}
}

// TestSetSyncStatusMessageSurvivesProgress: a status message set by one
// instance is seen by another instance's progress recompute (whose cached
// state predates it) as SyncProgressCurrent.Error, so a recompute that
// keeps it keeps it; one that does not replaces it (the seed's rule: the
// progress write stores its result's error).
func TestSetSyncStatusMessageSurvivesProgress(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		update := func(fn repository.RecomputeFunc) {
			require.NoError(t, e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: key, Recompute: fn}))
		}
		update(keepError(nil)) // creates the row; e.repo now remembers it
		update(keepError(nil))
		_, other := instance(t, e, repository.Options{})
		msg := "token revoked"
		_, err := other.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{Key: key, Status: models.SyncStatusError, Error: &msg})
		require.NoError(t, err)

		var seen *string
		update(keepError(func(cur *repository.SyncProgressCurrent) { seen = cur.Error }))
		require.Equal(t, &msg, seen, "the recompute saw the stored message")
		row, err := e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, models.SyncStatusError, row.Status)
		require.Equal(t, &msg, row.Error, "kept by a recompute that keeps it")

		update(func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			return repository.SyncProgressResult{Checkpoint: models.JSON(`{"n":2}`), LastSyncedAt: "t"}, nil
		})
		row, err = e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Nil(t, row.Error, "replaced by a result that names none")
		require.Equal(t, models.SyncStatusError, row.Status, "status is never written by progress")
	})
}

// TestProgressGuardsTheMessageItRead: SetSyncState (the seed's upsert)
// rewrites the error without bumping the version; one landing between a
// progress write's read and its write, with the same checkpoint and
// recovery, changes only the message. The progress write, which would have
// stored the message it read, must lose its CAS and recompute from the new
// one; guarded on version and documents only, it overwrote the message.
func TestProgressGuardsTheMessageItRead(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		old, fresh := "old message", "new message"
		checkpoint := models.JSON(`{"n":1}`)
		require.NoError(t, e.repo.SetSyncState(ctx(t), key, repository.SyncStateInput{Checkpoint: checkpoint,
			LastSyncedAt: "t", Status: models.SyncStatusError, Error: &old}))
		_, other := instance(t, e, repository.Options{})
		calls := 0
		require.NoError(t, e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: key,
			Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				calls++
				if calls == 1 {
					require.NoError(t, other.SetSyncState(ctx(t), key, repository.SyncStateInput{Checkpoint: checkpoint,
						LastSyncedAt: "t", Status: models.SyncStatusError, Error: &fresh}))
				}
				return repository.SyncProgressResult{Checkpoint: cur.Checkpoint, LastSyncedAt: "t2", Error: cur.Error}, nil
			}}))
		require.Equal(t, 2, calls, "the first write lost its CAS")
		row, err := e.repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, &fresh, row.Error)
		require.Equal(t, "t2", row.LastSyncedAt)
	})
}

// TestScopedProgressGuardsTheMessage: a scoped repository's progress write
// (the built CAS, not the written-out one) sees and keeps a status's
// message as the unscoped one does, and is guarded on the message it read:
// a SetSyncState that rewrites only the message between its read and its
// write makes it retry.
func TestScopedProgressGuardsTheMessage(t *testing.T) {
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
