package models

// Sweep-candidate states. applied and refused are resolved; a candidate is
// applied only from present, absent or cancelled.
const (
	CandidatePending   = "pending"
	CandidatePresent   = "present"
	CandidateAbsent    = "absent"
	CandidateCancelled = "cancelled"
	CandidateApplied   = "applied"
	CandidateRefused   = "refused"
)

// SweepReceipt is a row of kubun_connector_sweep_receipt: one complete
// relist of a partition, numbered by Sequence in recording order.
type SweepReceipt struct {
	OwnerDID       string `gorm:"column:owner_did;primaryKey;index:kubun_connector_sweep_receipt_pending_idx,priority:1;uniqueIndex:kubun_connector_sweep_receipt_sequence_key,priority:1"`
	ConnectorName  string `gorm:"column:connector_name;primaryKey;index:kubun_connector_sweep_receipt_pending_idx,priority:2;uniqueIndex:kubun_connector_sweep_receipt_sequence_key,priority:2"`
	Partition      string `gorm:"column:partition;primaryKey;uniqueIndex:kubun_connector_sweep_receipt_sequence_key,priority:3"`
	Provenance     string `gorm:"column:provenance;primaryKey"`
	Sequence       int64  `gorm:"column:sequence;type:bigint;not null;uniqueIndex:kubun_connector_sweep_receipt_sequence_key,priority:4"`
	ModelID        string `gorm:"column:model_id;not null"`
	Scope          JSON   `gorm:"column:scope"`
	Keep           JSON   `gorm:"column:keep"`
	SourceFetchHLC string `gorm:"column:source_fetch_hlc;not null"`
	Predicate      JSON   `gorm:"column:predicate"`
	Kind           string `gorm:"column:kind;not null"`
	// Complete is 1 for a complete relist; only complete ones are recorded.
	Complete    int64  `gorm:"column:complete;type:integer;not null"`
	CreatedAt   int64  `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false;index:kubun_connector_sweep_receipt_pending_idx,priority:4"`
	CommittedAt *int64 `gorm:"column:committed_at;type:bigint;index:kubun_connector_sweep_receipt_pending_idx,priority:3"`
}

// TableName returns the seed's table name.
func (SweepReceipt) TableName() string { return "kubun_connector_sweep_receipt" }

// SweepCandidate is a row of kubun_connector_sweep_candidate: one document a
// relist receipt asks to verify.
type SweepCandidate struct {
	OwnerDID      string  `gorm:"column:owner_did;primaryKey;index:kubun_connector_sweep_candidate_due_idx,priority:1;index:kubun_connector_sweep_candidate_state_idx,priority:1"`
	ConnectorName string  `gorm:"column:connector_name;primaryKey;index:kubun_connector_sweep_candidate_due_idx,priority:2;index:kubun_connector_sweep_candidate_state_idx,priority:2"`
	Partition     string  `gorm:"column:partition;primaryKey;index:kubun_connector_sweep_candidate_due_idx,priority:4;index:kubun_connector_sweep_candidate_state_idx,priority:3"`
	Provenance    string  `gorm:"column:provenance;primaryKey;index:kubun_connector_sweep_candidate_due_idx,priority:5"`
	DocumentID    string  `gorm:"column:document_id;primaryKey;index:kubun_connector_sweep_candidate_due_idx,priority:6"`
	SourceID      *string `gorm:"column:source_id"`
	ModelID       string  `gorm:"column:model_id;not null"`
	State         string  `gorm:"column:state;not null;index:kubun_connector_sweep_candidate_state_idx,priority:4"`
	Attempts      int64   `gorm:"column:attempts;type:bigint;not null;default:0"`
	ApplyFailures int64   `gorm:"column:apply_failures;type:bigint;not null;default:0"`
	LastError     *string `gorm:"column:last_error"`
	UpdatedAt     int64   `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
	NextAttemptAt int64   `gorm:"column:next_attempt_at;type:bigint;not null;default:0;index:kubun_connector_sweep_candidate_due_idx,priority:3"`
}

// TableName returns the seed's table name.
func (SweepCandidate) TableName() string { return "kubun_connector_sweep_candidate" }

// SweepCheckpoint is a row of kubun_connector_sweep_checkpoint: the newest
// committed receipt of a partition. It only ever moves forward.
type SweepCheckpoint struct {
	OwnerDID        string `gorm:"column:owner_did;primaryKey"`
	ConnectorName   string `gorm:"column:connector_name;primaryKey"`
	Partition       string `gorm:"column:partition;primaryKey"`
	Provenance      string `gorm:"column:provenance;not null"`
	ReceiptSequence int64  `gorm:"column:receipt_sequence;type:bigint;not null"`
	UpdatedAt       int64  `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
}

// TableName returns the seed's table name.
func (SweepCheckpoint) TableName() string { return "kubun_connector_sweep_checkpoint" }
