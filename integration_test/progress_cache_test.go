package integrationtest

import (
	"context"
	"errors"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// appendPage is a recompute that appends one page number to the checkpoint
// {"pages":[...]}, so a lost update shows as a missing page.
func appendPage(t *testing.T, page int, seen *[]int64) repository.RecomputeFunc {
	return func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		doc := struct {
			Pages []int `json:"pages"`
		}{}
		if cur != nil {
			require.NoError(t, cur.Checkpoint.Decode(&doc))
			*seen = append(*seen, cur.Version)
		}
		doc.Pages = append(doc.Pages, page)
		return repository.SyncProgressResult{Checkpoint: mustJSON(t, doc), LastSyncedAt: "t", EntityCount: int64(page)}, nil
	}
}

// pageUpdater returns an update of crm/o through a repository that appends
// one page, with maxRetries (nil: the default).
func pageUpdater(t *testing.T, maxRetries *int) func(*repository.Repository, int) error {
	var seen []int64
	return func(r *repository.Repository, page int) error {
		return r.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
			Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Recompute: appendPage(t, page, &seen), MaxRetries: maxRetries})
	}
}

func pages(t *testing.T, e *env) string {
	t.Helper()
	st, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
	require.NoError(t, err)
	return st.Checkpoint.String()
}

// TestProgressCacheOneRoundTrip: the repository's second update of a row
// it wrote is one UPDATE, recomputed from what its first write left.
func TestProgressCacheOneRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, rec := recordingRepo(t, e)
		var seen []int64
		for page := 1; page <= 3; page++ {
			require.NoError(t, repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
				Recompute: appendPage(t, page, &seen)}))
		}
		stmts := rec.take()
		require.Equal(t, 0, countPrefix(stmts[2:], "SELECT"), "after the insert and the first update, no reads:\n%v", stmts)
		require.Equal(t, 2, countPrefix(stmts, "UPDATE"))
		require.Equal(t, []int64{0, 1}, seen, "each recompute saw the version the previous write left")
		require.JSONEq(t, `{"pages":[1,2,3]}`, pages(t, e))
	})
}

// TestProgressCacheStaleFallsBack: another writer's update (through the
// plugin, a CAS of another repository, a delete and recreate) makes the
// remembered state stale; the update notices by its guard, does not count
// that attempt (MaxRetries 0 still succeeds) and loses nothing.
func TestProgressCacheStaleFallsBack(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		other := realRepo(t, e)
		zero := 0
		update := pageUpdater(t, &zero)
		require.NoError(t, update(e.repo, 1))
		require.NoError(t, update(other, 2)) // another repository's CAS
		require.NoError(t, update(e.repo, 3))
		require.JSONEq(t, `{"pages":[1,2,3]}`, pages(t, e))

		require.NoError(t, e.db.Model(&models.SyncState{}).Where("owner_did = ?", "o").
			Update("checkpoint", models.JSON(`{"pages":[9]}`)).Error) // an app's write through the plugin
		require.NoError(t, update(e.repo, 4))
		require.JSONEq(t, `{"pages":[9,4]}`, pages(t, e))

		require.NoError(t, other.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})) // recreated: a new incarnation
		require.NoError(t, update(other, 5))
		require.NoError(t, update(e.repo, 6))
		require.JSONEq(t, `{"pages":[5,6]}`, pages(t, e))
	})
}

// TestProgressCacheIgnoresCallerTx: a write in a caller's transaction that
// rolls back is not remembered. Had it been, its version would match the
// next writer's and the repository would recompute from a state that never
// committed, losing that writer's update.
func TestProgressCacheIgnoresCallerTx(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		other := realRepo(t, e)
		update := pageUpdater(t, nil)
		require.NoError(t, update(e.repo, 1))
		rollback := errors.New("roll back")
		err := e.repo.Transaction(ctx(t), func(_ *gorm.DB, repo *repository.Repository) error {
			require.NoError(t, update(repo, 2))
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		require.NoError(t, update(other, 3)) // takes the version the rolled-back write had
		require.NoError(t, update(e.repo, 4))
		require.JSONEq(t, `{"pages":[1,3,4]}`, pages(t, e))
	})
}

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
