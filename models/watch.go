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
	OwnerDID             string  `gorm:"column:owner_did;primaryKey"`
	ConnectorName        string  `gorm:"column:connector_name;primaryKey"`
	Model                string  `gorm:"column:model;primaryKey"`
	AccountKey           string  `gorm:"column:account_key;primaryKey"`
	SourceID             string  `gorm:"column:source_id;primaryKey"`
	DocumentID           string  `gorm:"column:document_id;not null"`
	VerifiedStateDigest  *string `gorm:"column:verified_state_digest"`
	ObservedWinnerDigest *string `gorm:"column:observed_winner_digest"`
	VerificationStatus   string  `gorm:"column:verification_status;not null"`
	VerificationAttempts int64   `gorm:"column:verification_attempts;type:bigint;not null;default:0"`
	RepairGeneration     int64   `gorm:"column:repair_generation;type:bigint;not null;default:0"`
	NextAttemptAt        *int64  `gorm:"column:next_attempt_at;type:bigint"`
	VersionLock
	CreatedAt int64 `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false"`
	UpdatedAt int64 `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
}

// TableName returns the seed's table name.
func (ProjectionWatch) TableName() string { return "kubun_connector_projection_watch" }
