package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func seedSyncRow(t *testing.T, db *gorm.DB, owner string) *models.SyncState {
	t.Helper()
	row := &models.SyncState{ConnectorName: "c", OwnerDID: owner, LastSyncedAt: "t0", Status: models.SyncStatusIdle}
	require.NoError(t, db.Create(row).Error)
	return row
}

func loadSyncRow(t *testing.T, db *gorm.DB, owner string) *models.SyncState {
	t.Helper()
	var row models.SyncState
	require.NoError(t, db.Where("connector_name = ? AND owner_did = ?", "c", owner).Take(&row).Error)
	return &row
}

func TestHookCreateSeedsLock(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		row := &models.SyncState{ConnectorName: "c", OwnerDID: "o", LastSyncedAt: "t0", Status: "idle"}
		row.Version = 7 // a caller-set version is not trusted on insert
		require.NoError(t, e.db.Create(row).Error)
		got := loadSyncRow(t, e.db, "o")
		require.Equal(t, int64(0), got.Version)
		require.Equal(t, "id-1", *got.Incarnation)
	})
}

func TestHookCASUpdate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedSyncRow(t, e.db, "o")
		a, b := loadSyncRow(t, e.db, "o"), loadSyncRow(t, e.db, "o")

		require.NoError(t, e.db.Model(a).Updates(map[string]any{"entity_count": 1}).Error)
		require.Equal(t, int64(1), a.Version, "in-memory version follows the write")

		// b read version 0: its write must fail loudly and change nothing.
		err := e.db.Model(b).Updates(map[string]any{"entity_count": 99}).Error
		require.ErrorIs(t, err, hooks.ErrConflict)
		require.Equal(t, int64(0), b.Version, "a failed write leaves the read version")
		got := loadSyncRow(t, e.db, "o")
		require.Equal(t, int64(1), got.EntityCount)
		require.Equal(t, int64(1), got.Version)

		// Save (struct destination) goes through the same guard.
		got.EntityCount = 5
		require.NoError(t, e.db.Save(got).Error)
		require.Equal(t, int64(2), loadSyncRow(t, e.db, "o").Version)
		require.ErrorIs(t, e.db.Save(b).Error, hooks.ErrConflict)
	})
}

func TestHookIncarnationGuardsRecreatedRow(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedSyncRow(t, e.db, "o")
		stale := loadSyncRow(t, e.db, "o")
		require.NoError(t, e.db.Delete(&models.SyncState{}, "owner_did = ?", "o").Error)
		seedSyncRow(t, e.db, "o") // same version 0, new incarnation
		err := e.db.Model(stale).Updates(map[string]any{"entity_count": 3}).Error
		require.ErrorIs(t, err, hooks.ErrConflict)
		require.Equal(t, int64(0), loadSyncRow(t, e.db, "o").EntityCount)
	})
}

func TestHookMissingIncarnationIsLoud(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_sync_state
			(connector_name, owner_did, last_synced_at, entity_count, status, version)
			VALUES ('c', 'legacy', 't0', 0, 'idle', 0)`).Error)
		row := loadSyncRow(t, e.db, "legacy")
		err := e.db.Model(row).Updates(map[string]any{"entity_count": 1}).Error
		require.ErrorIs(t, err, hooks.ErrMissingLock)
		require.Equal(t, int64(0), loadSyncRow(t, e.db, "legacy").EntityCount)
	})
}

func TestHookSetBasedUpdateBumpsVersion(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedSyncRow(t, e.db, "o1")
		seedSyncRow(t, e.db, "o2")
		res := e.db.Model(&models.SyncState{}).Where("connector_name = ?", "c").
			Updates(map[string]any{"entity_count": 4})
		require.NoError(t, res.Error)
		require.Equal(t, int64(2), res.RowsAffected)
		require.Equal(t, int64(1), loadSyncRow(t, e.db, "o1").Version)
		require.Equal(t, int64(1), loadSyncRow(t, e.db, "o2").Version)

		// A struct is converted to a column map, so it bumps every row too.
		res = e.db.Model(&models.SyncState{}).Where("connector_name = ?", "c").
			Updates(models.SyncState{EntityCount: 9})
		require.NoError(t, res.Error)
		require.Equal(t, int64(2), res.RowsAffected)
		for _, o := range []string{"o1", "o2"} {
			got := loadSyncRow(t, e.db, o)
			require.Equal(t, int64(2), got.Version)
			require.Equal(t, int64(9), got.EntityCount)
		}
	})
}

func TestHookSkipLockBypasses(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedSyncRow(t, e.db, "o")
		stale := loadSyncRow(t, e.db, "o")
		require.NoError(t, e.db.Model(loadSyncRow(t, e.db, "o")).Updates(map[string]any{"entity_count": 1}).Error)
		// Skipped: no version check (stale read succeeds) and no bump.
		require.NoError(t, hooks.SkipLock(e.db).Model(stale).Updates(map[string]any{"status": "error"}).Error)
		got := loadSyncRow(t, e.db, "o")
		require.Equal(t, "error", got.Status)
		require.Equal(t, int64(1), got.Version)
	})
}

func TestHookPluginRegistration(t *testing.T) {
	t.Parallel()
	db := openBare(t, sqlitekind)
	p := hooks.New(hooks.Config{})
	require.Equal(t, "connstore:optimistic_lock", p.Name())
	require.False(t, hooks.Registered(db))
	require.NoError(t, db.Use(p))
	require.True(t, hooks.Registered(db))
	// Initialize again re-binds instead of stacking a second guard.
	require.NoError(t, p.Initialize(db))
}

// TestHookGeneratedSQL pins the guarded UPDATE the plugin produces.
func TestHookGeneratedSQL(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedSyncRow(t, e.db, "o")
		row := loadSyncRow(t, e.db, "o")
		sql := e.db.ToSQL(func(tx *gorm.DB) *gorm.DB {
			return tx.Model(row).Updates(map[string]any{"entity_count": 2})
		})
		require.Regexp(t, `SET .entity_count.=2,.version.=1 WHERE .kubun_connector_sync_state.\..version. = 0 `+
			`AND .kubun_connector_sync_state.\..incarnation. = .id-1. AND .connector_name. = .c. AND .owner_did. = .o.$`, sql)
		require.Equal(t, int64(0), row.Version, "a dry run leaves the model as read")
		require.Equal(t, int64(0), loadSyncRow(t, e.db, "o").Version)
	})
}
