package models

// Sync-state status values. UpdateProgress never writes status: the
// connector's workflow owns it.
const (
	SyncStatusIdle    = "idle"
	SyncStatusSyncing = "syncing"
	SyncStatusError   = "error"
)

// SyncState is a row of kubun_connector_sync_state: one connector's sync
// progress for one owner.
type SyncState struct {
	ConnectorName string  `gorm:"column:connector_name;primaryKey"`
	OwnerDID      string  `gorm:"column:owner_did;primaryKey"`
	Checkpoint    JSON    `gorm:"column:checkpoint"`
	LastSyncedAt  string  `gorm:"column:last_synced_at;not null"`
	EntityCount   int64   `gorm:"column:entity_count;type:bigint;not null"`
	Status        string  `gorm:"column:status;not null"`
	Error         *string `gorm:"column:error"`
	// LeaseExpiresAt is dead: written NULL on insert and never read. It is
	// kept so the schema stays compatible with existing databases.
	LeaseExpiresAt *int64 `gorm:"column:lease_expires_at;type:bigint"`
	// Recovery is the connector's durable recovery buffer; NULL means empty.
	Recovery JSON `gorm:"column:recovery"`
	Lock
}

// TableName returns the seed's table name.
func (SyncState) TableName() string { return "kubun_connector_sync_state" }
