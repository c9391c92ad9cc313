package integrationtest

import (
	"bytes"
	"context"
	"log"
	"sync"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestExpectedOutcomesStayOutOfTheLog: with gorm's own logger at Warn, a
// retried CAS loss and an absent row log nothing; a real failure still logs.
func TestExpectedOutcomesStayOutOfTheLog(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		sink := &syncBuffer{}
		db := e.db.Session(&gorm.Session{Logger: logger.New(log.New(sink, "", 0),
			logger.Config{LogLevel: logger.Warn, Colorful: false})})
		repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)

		_, err = repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "nobody", ConnectorName: "crm"})
		require.ErrorIs(t, err, repository.ErrNotFound)

		require.NoError(t, repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
		calls := 0
		err = repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
			Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				if calls++; calls == 1 { // a concurrent writer wins the first round
					require.NoError(t, e.db.Model(&models.SyncState{}).Where("owner_did = ?", "o").
						Update("entity_count", 7).Error)
				}
				return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 1}, nil
			}})
		require.NoError(t, err)
		require.Equal(t, 2, calls, "the first attempt lost its CAS and was retried")
		require.Empty(t, sink.String(), "expected outcomes are not errors")

		require.NoError(t, e.db.Exec("DROP TABLE kubun_connector_sync_state").Error)
		_, err = repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.Error(t, err)
		require.Contains(t, sink.String(), "kubun_connector_sync_state", "a real failure still reaches the log")
	})
}

// TestParameterizedQueriesStayParameterized: an application logger that
// keeps values out of its log (gorm's ParameterizedQueries) does so for the
// repository's statements too, so a saved verifier never reaches it.
func TestParameterizedQueriesStayParameterized(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		sink := &syncBuffer{}
		db := e.db.Session(&gorm.Session{Logger: logger.New(log.New(sink, "", 0),
			logger.Config{LogLevel: logger.Info, Colorful: false, ParameterizedQueries: true})})
		repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		_, err = repo.SavePendingAuth(ctx(t), pendingInput(e, "param-state"))
		require.NoError(t, err)
		require.Contains(t, sink.String(), "kubun_connector_pending_auth", "the statement is logged")
		require.NotContains(t, sink.String(), verifier, "its values are not")
		require.NotContains(t, sink.String(), "param-state")
	})
}

// TestHookSecondUse: db.Use of a second plugin is refused with gorm's
// ErrRegistered and the first stays bound; Initialize re-binds without
// stacking a second guard.
func TestHookSecondUse(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	require.ErrorIs(t, e.db.Use(hooks.New(hooks.Config{})), gorm.ErrRegistered)
	require.NoError(t, hooks.New(hooks.Config{}).Initialize(e.db))
	seedSyncRow(t, e.db, "o")
	row := loadSyncRow(t, e.db, "o")
	require.NoError(t, e.db.Model(row).Update("entity_count", 3).Error)
	require.Equal(t, int64(1), loadSyncRow(t, e.db, "o").Version, "one guard, one bump")
}
