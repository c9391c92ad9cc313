package models

// RetentionPending is a row of kubun_connector_retention_pending: a finished
// (committed or dead) operation retention has not judged since it last
// changed. Triggers in the writing statement's own transaction keep the
// table equal to that set: a row that finishes, or whose state, updated_at,
// owner or connector changes while finished, enters it; one that leaves a
// finished state, or is deleted, leaves it. A retention pass reads its
// window here, in pass order (Ord), deletes the rows the keep rules
// collect and moves the ones they keep to RetentionHeld (the rows are held:
// not judged again until a later finish on their document moves them
// back). Holding a row is then the move of a narrow entry, not a new
// version of the operation in every index of the journal.
type RetentionPending struct {
	// Ord is the entry's place in the pass order: the row's updated_at when
	// it finished or changed, the time of its release when a finish on its
	// document released it (migration 0018), so released rows queue behind
	// the rows waiting already instead of ahead of them.
	Ord           int64  `gorm:"column:ord;type:bigint;primaryKey;autoIncrement:false;index:kubun_connector_retention_pending_owner_idx,priority:2"`
	CallerDID     string `gorm:"column:caller_did;primaryKey;index:kubun_connector_retention_pending_owner_idx,priority:3"`
	OperationID   string `gorm:"column:operation_id;primaryKey;index:kubun_connector_retention_pending_owner_idx,priority:4"`
	UpdatedAt     int64  `gorm:"column:updated_at;type:bigint;not null;autoCreateTime:false;autoUpdateTime:false"`
	OwnerDID      string `gorm:"column:owner_did;not null;index:kubun_connector_retention_pending_owner_idx,priority:1"`
	ConnectorName string `gorm:"column:connector_name;not null"`
}

// TableName returns the table name.
func (RetentionPending) TableName() string { return "kubun_connector_retention_pending" }
