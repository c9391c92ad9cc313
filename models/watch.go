package models

// Projection-watch verification states.
const (
	WatchPendingVerification = "pending_verification"
	WatchVerified            = "verified"
	WatchRepairFailed        = "repair_failed"
)

// ProjectionWatch is a row of kubun_connector_projection_watch: a written
// document whose projection is re-verified against the current winner.
type ProjectionWatch struct {
	OwnerDID             string  `gorm:"column:owner_did;primaryKey;index:kubun_connector_projection_watch_schedule_idx,priority:2;index:kubun_connector_projection_watch_audit_idx,priority:2"`
	ConnectorName        string  `gorm:"column:connector_name;primaryKey;index:kubun_connector_projection_watch_schedule_idx,priority:3;index:kubun_connector_projection_watch_audit_idx,priority:3"`
	Model                string  `gorm:"column:model;primaryKey;index:kubun_connector_projection_watch_schedule_idx,priority:4;index:kubun_connector_projection_watch_audit_idx,priority:4"`
	AccountKey           string  `gorm:"column:account_key;primaryKey;index:kubun_connector_projection_watch_schedule_idx,priority:5;index:kubun_connector_projection_watch_audit_idx,priority:5"`
	SourceID             string  `gorm:"column:source_id;primaryKey;index:kubun_connector_projection_watch_schedule_idx,priority:6;index:kubun_connector_projection_watch_audit_idx,priority:6"`
	DocumentID           string  `gorm:"column:document_id;not null;index:kubun_connector_projection_watch_document_idx,priority:1"`
	VerifiedStateDigest  *string `gorm:"column:verified_state_digest"`
	ObservedWinnerDigest *string `gorm:"column:observed_winner_digest"`
	VerificationStatus   string  `gorm:"column:verification_status;not null;index:kubun_connector_projection_watch_audit_idx,priority:1"`
	VerificationAttempts int64   `gorm:"column:verification_attempts;type:bigint;not null;default:0"`
	RepairGeneration     int64   `gorm:"column:repair_generation;type:bigint;not null;default:0"`
	NextAttemptAt        *int64  `gorm:"column:next_attempt_at;type:bigint;index:kubun_connector_projection_watch_schedule_idx,priority:1"`
	VersionLock
	CreatedAt int64 `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false"`
	UpdatedAt int64 `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
}

// TableName returns the seed's table name.
func (ProjectionWatch) TableName() string { return "kubun_connector_projection_watch" }
