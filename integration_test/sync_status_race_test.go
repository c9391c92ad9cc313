package integrationtest

import (
	"sync/atomic"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// Was: SetSyncStatus's compare-and-swap is on version and incarnation
// only, but SetSyncState (the seed's upsert) rewrites status without
// bumping the version. A SetSyncState landing between SetSyncStatus's read
// and its write is silently overwritten, and IfStatus ("only syncing may
// become error; any other is a *StateError and nothing is written") is
// violated: the row was idle when the write landed. UpdateSyncProgress
// guards on the stored documents for exactly this reason; SetSyncStatus
// does not guard on the status it checked.
func TestSetSyncStatusRacesSetSyncState(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}
		require.NoError(t, e.repo.SetSyncState(ctx(t), key, repository.SyncStateInput{
			LastSyncedAt: "t1", EntityCount: 5, Status: models.SyncStatusSyncing}))
		_, other := instance(t, e, repository.Options{})

		// Another instance's SetSyncState lands between SetSyncStatus's
		// read and its guarded UPDATE.
		var armed atomic.Bool
		armed.Store(true)
		var interleaveErr error
		require.NoError(t, e.db.Callback().Update().Before("gorm:update").Register("review:interleave", func(db *gorm.DB) {
			if db.Statement.Table == "kubun_connector_sync_state" && armed.CompareAndSwap(true, false) {
				interleaveErr = other.SetSyncState(ctx(t), key, repository.SyncStateInput{
					LastSyncedAt: "t2", EntityCount: 0, Status: models.SyncStatusIdle})
			}
		}))

		_, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{
			Key:    repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
			Status: models.SyncStatusError, IfStatus: []string{models.SyncStatusSyncing}})
		require.NoError(t, interleaveErr)
		require.False(t, armed.Load(), "the interleaving ran")

		row, gerr := other.GetSyncState(ctx(t), key)
		require.NoError(t, gerr)
		require.Equal(t, models.SyncStatusIdle, row.Status,
			"SetSyncState's status was overwritten by a SetSyncStatus whose IfStatus no longer held (err %v)", err)
		require.ErrorIs(t, err, repository.ErrWrongState)
	})
}
