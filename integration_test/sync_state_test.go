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

func mustJSON(t *testing.T, v any) models.JSON {
	t.Helper()
	j, err := models.NewJSON(v)
	require.NoError(t, err)
	return j
}

func baseState(t *testing.T) repository.SyncStateInput {
	return repository.SyncStateInput{
		Checkpoint: mustJSON(t, map[string]any{"cursor": "a"}), LastSyncedAt: "2026-01-01T00:00:00Z",
		EntityCount: 3, Status: models.SyncStatusSyncing, Recovery: mustJSON(t, []int{1}),
	}
}

func TestSyncStateGetMissing(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.ErrorIs(t, err, repository.ErrNotFound)
		require.ErrorIs(t, err, gorm.ErrRecordNotFound)
	})
}

func TestSyncStateSetInsertThenConflict(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, baseState(t)))
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(0), got.Version)
		require.Equal(t, "id-1", *got.Incarnation)
		require.Nil(t, got.LeaseExpiresAt)
		require.JSONEq(t, `{"cursor":"a"}`, got.Checkpoint.String())
		require.Equal(t, models.SyncStatusSyncing, got.Status)

		// Give the row a version and a (dead) lease; the upsert must keep both
		// and the incarnation, while replacing every state column.
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_sync_state SET version = 4, lease_expires_at = 99`).Error)
		next := repository.SyncStateInput{LastSyncedAt: "t2", EntityCount: 9, Status: models.SyncStatusError,
			Error: models.StrPtr("boom")}
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, next))
		got, err = e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(4), got.Version)
		require.Equal(t, "id-1", *got.Incarnation)
		require.Equal(t, int64(99), *got.LeaseExpiresAt)
		require.True(t, got.Checkpoint.IsNull())
		require.True(t, got.Recovery.IsNull())
		require.Equal(t, "t2", got.LastSyncedAt)
		require.Equal(t, int64(9), got.EntityCount)
		require.Equal(t, models.SyncStatusError, got.Status)
		require.Equal(t, "boom", *got.Error)
	})
}

// progress returns a recompute that adds delta to the entity count and
// records every current it was called with.
type progressRecorder struct {
	calls []*repository.SyncProgressCurrent
	delta int64
	hook  func(call int) // runs inside the recompute, before it returns
}

func (p *progressRecorder) fn(t *testing.T, e *env) repository.RecomputeFunc {
	return func(c context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		p.calls = append(p.calls, cur)
		if p.hook != nil {
			p.hook(len(p.calls))
		}
		var count int64
		if cur != nil {
			var cp struct{ N int64 }
			require.NoError(t, cur.Checkpoint.Decode(&cp))
			count = cp.N
		}
		count += p.delta
		return repository.SyncProgressResult{
			Checkpoint: mustJSON(t, map[string]int64{"N": count}), LastSyncedAt: "now", EntityCount: count,
		}, nil
	}
}

func TestUpdateProgressInsertsIdle(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		rec := &progressRecorder{delta: 2}
		require.NoError(t, updateProgress(t, e, rec.fn(t, e)))
		require.Equal(t, []*repository.SyncProgressCurrent{nil}, rec.calls)
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, models.SyncStatusIdle, got.Status)
		require.Equal(t, int64(2), got.EntityCount)
		require.Equal(t, int64(0), got.Version)
		require.NotNil(t, got.Incarnation)
		require.Nil(t, got.LeaseExpiresAt)
	})
}

func TestUpdateProgressNeverWritesStatus(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, baseState(t)))
		rec := &progressRecorder{delta: 1}
		require.NoError(t, updateProgress(t, e, rec.fn(t, e)))
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, models.SyncStatusSyncing, got.Status)
		require.Equal(t, int64(1), got.Version)
		require.Equal(t, int64(1), got.EntityCount)
		require.Len(t, rec.calls, 1)
		require.Equal(t, int64(0), rec.calls[0].Version)
		require.Equal(t, "id-1", rec.calls[0].Incarnation)
	})
}

func TestUpdateProgressLoserRecomputesFromWinner(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		setCounter(t, e, 10)
		rec := &progressRecorder{delta: 1}
		rec.hook = func(call int) {
			if call == 1 { // a concurrent writer lands between our read and write
				winner := &progressRecorder{delta: 100}
				require.NoError(t, updateProgress(t, e, winner.fn(t, e)))
			}
		}
		require.NoError(t, updateProgress(t, e, rec.fn(t, e)))
		require.Len(t, rec.calls, 2)
		require.Equal(t, int64(1), rec.calls[1].Version, "retry reads the winner's row")
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(111), got.EntityCount, "neither update is lost")
		require.Equal(t, int64(2), got.Version)
	})
}

func TestUpdateProgressRecreatedRowRejectsStaleRead(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		setCounter(t, e, 10)
		rec := &progressRecorder{delta: 1}
		rec.hook = func(call int) {
			if call == 1 { // delete + recreate: same version 0, new incarnation
				require.NoError(t, e.repo.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}))
				setCounter(t, e, 50)
			}
		}
		require.NoError(t, updateProgress(t, e, rec.fn(t, e)))
		require.Len(t, rec.calls, 2)
		require.Equal(t, rec.calls[0].Version, rec.calls[1].Version, "same version, so only the incarnation caught it")
		require.NotEqual(t, rec.calls[0].Incarnation, rec.calls[1].Incarnation)
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(51), got.EntityCount, "rebased on the new row, not the stale one")
	})
}

func TestUpdateProgressExhaustion(t *testing.T) {
	t.Parallel()
	for _, maxRetries := range []int{0, 2, repository.DefaultMaxRetries} {
		forEachDB(t, func(t *testing.T, e *env) {
			require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, baseState(t)))
			rec := &progressRecorder{}
			rec.hook = func(int) { // every attempt loses to a concurrent bump
				require.NoError(t, e.db.Exec(`UPDATE kubun_connector_sync_state SET version = version + 1`).Error)
			}
			params := repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, Recompute: rec.fn(t, e)}
			if maxRetries != repository.DefaultMaxRetries {
				params.MaxRetries = &maxRetries
			}
			err := e.repo.UpdateSyncProgress(ctx(t), params)
			require.ErrorIs(t, err, repository.ErrRetriesExhausted)
			var exhausted *repository.RetriesExhaustedError
			require.ErrorAs(t, err, &exhausted)
			require.Equal(t, maxRetries+1, exhausted.Attempts)
			require.Len(t, rec.calls, maxRetries+1)
			require.Contains(t, err.Error(), "c/o")
			got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
			require.NoError(t, err)
			require.Equal(t, int64(3), got.EntityCount, "no attempt wrote")
		})
	}
}

func TestUpdateProgressRecomputeErrorAborts(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		boom := errors.New("boom")
		fail := func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			return repository.SyncProgressResult{}, boom
		}
		p := repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, Recompute: fail}
		require.ErrorIs(t, e.repo.UpdateSyncProgress(ctx(t), p), boom)
		require.Equal(t, int64(0), count(t, e.db, &models.SyncState{}), "insert path wrote nothing")

		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, baseState(t)))
		require.ErrorIs(t, e.repo.UpdateSyncProgress(ctx(t), p), boom)
		got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
		require.NoError(t, err)
		require.Equal(t, int64(0), got.Version, "update path wrote nothing")
	})
}

func TestSyncStateBadInput(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		return repository.SyncProgressResult{LastSyncedAt: "t"}, nil
	}
	result := func(r repository.SyncProgressResult) repository.RecomputeFunc {
		return func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			return r, nil
		}
	}
	negative := -1
	forEachDB(t, func(t *testing.T, e *env) {
		good := baseState(t)
		withStatus, withJSON, withCount := good, good, good
		withStatus.Status = "paused"
		withJSON.Checkpoint = models.JSON(`{"unterminated`)
		withCount.EntityCount = -1
		cases := []struct {
			name string
			call func() error
		}{
			{"get empty connector", func() error {
				_, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: ""})
				return err
			}},
			{"set empty owner", func() error {
				return e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "", ConnectorName: "c"}, good)
			}},
			{"set unknown status", func() error {
				return e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, withStatus)
			}},
			{"set malformed JSON", func() error {
				return e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, withJSON)
			}},
			{"set negative count", func() error {
				return e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, withCount)
			}},
			{"update empty connector", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "o"}, Recompute: ok})
			}},
			{"update empty owner", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{ConnectorName: "c"}, Recompute: ok})
			}},
			{"update nil recompute", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}})
			}},
			{"update negative retries", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: ok, MaxRetries: &negative})
			}},
			{"update malformed result", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: result(repository.SyncProgressResult{LastSyncedAt: "t", Recovery: models.JSON("{")})})
			}},
			{"update empty last synced", func() error {
				return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: result(repository.SyncProgressResult{})})
			}},
			{"delete empty owner", func() error {
				return e.repo.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "", ConnectorName: "c"})
			}},
			{"list zero limit", func() error {
				_, err := e.repo.ListSyncStates(ctx(t), repository.ListSyncStatesParams{ConnectorName: "c"})
				return err
			}},
			{"list empty connector", func() error {
				_, err := e.repo.ListSyncStates(ctx(t), repository.ListSyncStatesParams{Limit: 1})
				return err
			}},
		}
		for _, tc := range cases {
			require.ErrorIs(t, tc.call(), repository.ErrInvalidInput, tc.name)
		}
		require.Equal(t, int64(0), count(t, e.db, &models.SyncState{}), "bad input wrote nothing")
	})
}

func TestSyncStateListAndDelete(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, owner := range []string{"o3", "o1", "o2", "o4"} {
			require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: owner, ConnectorName: "c"}, baseState(t)))
		}
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o1", ConnectorName: "other"}, baseState(t)))
		var owners []string
		after := ""
		for {
			page, err := e.repo.ListSyncStates(ctx(t), repository.ListSyncStatesParams{
				ConnectorName: "c", AfterOwnerDID: after, Limit: 3})
			require.NoError(t, err)
			for _, row := range page {
				owners = append(owners, row.OwnerDID)
			}
			if len(page) < 3 {
				break
			}
			after = page[len(page)-1].OwnerDID
		}
		require.Equal(t, []string{"o1", "o2", "o3", "o4"}, owners)

		require.NoError(t, e.repo.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o2", ConnectorName: "c"}))
		require.NoError(t, e.repo.DeleteSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o2", ConnectorName: "c"}), "deleting a missing row is fine")
		_, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o2", ConnectorName: "c"})
		require.ErrorIs(t, err, repository.ErrNotFound)
		require.Equal(t, int64(4), count(t, e.db, &models.SyncState{}))
	})
}

func TestNewRequiresPlugin(t *testing.T) {
	t.Parallel()
	_, err := repository.New(openBare(t, sqlitekind), repository.Options{})
	require.ErrorIs(t, err, repository.ErrPluginMissing)
}

// setCounter writes the row c/o with checkpoint {"N": n}.
func setCounter(t *testing.T, e *env, n int) {
	t.Helper()
	require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, repository.SyncStateInput{
		Checkpoint: mustJSON(t, map[string]int{"N": n}), LastSyncedAt: "t", Status: "idle"}))
}

// updateProgress runs UpdateSyncProgress on c/o with the default retries.
func updateProgress(t *testing.T, e *env, fn repository.RecomputeFunc) error {
	return e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
		Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
		Recompute: fn})
}
