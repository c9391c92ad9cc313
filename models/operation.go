package models

// Operation states. `attempted` is the one non-terminal state; committed,
// dead and reconcile_only are terminal.
const (
	OperationAttempted     = "attempted"
	OperationCommitted     = "committed"
	OperationDead          = "dead"
	OperationReconcileOnly = "reconcile_only"
)

// Operation is a row of kubun_connector_operation: one outbound write of a
// connector, with its retry and lease bookkeeping.
type Operation struct {
	CallerDID            string  `gorm:"column:caller_did;primaryKey;index:kubun_connector_operation_doc_caller_idx,priority:2"`
	OperationID          string  `gorm:"column:operation_id;primaryKey"`
	NodeKey              string  `gorm:"column:node_key;not null"`
	OwnerDID             string  `gorm:"column:owner_did;not null;index:kubun_connector_operation_doc_owner_idx,priority:2;index:kubun_connector_operation_owner_idx,priority:1"`
	ConnectorName        string  `gorm:"column:connector_name;not null;index:kubun_connector_operation_flow_idx,priority:1,where:state = 'attempted' AND flow;index:kubun_connector_operation_flow_lease_idx,priority:1,where:state = 'attempted' AND flow AND lease_token IS NOT NULL;index:kubun_connector_operation_flow_doc_idx,priority:1,where:state = 'attempted' AND flow AND document_id IS NOT NULL"`
	Model                string  `gorm:"column:model;not null"`
	Op                   string  `gorm:"column:op;not null"`
	AccountKey           string  `gorm:"column:account_key;not null;index:kubun_connector_operation_flow_idx,priority:2;index:kubun_connector_operation_flow_lease_idx,priority:2"`
	Target               string  `gorm:"column:target;not null"`
	SourceID             *string `gorm:"column:source_id"`
	DeterministicEventID string  `gorm:"column:deterministic_event_id;not null"`
	PayloadHash          string  `gorm:"column:payload_hash;not null"`
	ReissueIntent        JSON    `gorm:"column:reissue_intent;not null"`
	ProviderEtag         *string `gorm:"column:provider_etag"`
	DocumentID           *string `gorm:"column:document_id;index:kubun_connector_operation_doc_caller_idx,priority:1,where:document_id IS NOT NULL;index:kubun_connector_operation_doc_owner_idx,priority:1,where:document_id IS NOT NULL;index:kubun_connector_operation_flow_doc_idx,priority:2"`
	ResultEntity         JSON    `gorm:"column:result_entity"`
	State                string  `gorm:"column:state;not null;index:kubun_connector_operation_state_key_idx,priority:1"`
	Attempts             int64   `gorm:"column:attempts;type:bigint;not null;default:0"`
	NextAttemptAt        *int64  `gorm:"column:next_attempt_at;type:bigint;index:kubun_connector_operation_claim_idx,expression:COALESCE(next_attempt_at\\, created_at),where:state = 'attempted' AND NOT flow;index:kubun_connector_operation_flow_idx,priority:3,expression:COALESCE(next_attempt_at\\, created_at);index:kubun_connector_operation_flow_due_idx,expression:COALESCE(next_attempt_at\\, created_at),where:state = 'attempted' AND flow"`
	LastKind             *string `gorm:"column:last_kind"`
	LastHTTPStatus       *int64  `gorm:"column:last_http_status;type:bigint"`
	// LastMessage is the short text the last answer came with (migration
	// 0023), cleaned of control characters and cut to 500 bytes.
	LastMessage *string `gorm:"column:last_message"`
	// LastAnswerAt is when the last answer (LastKind, LastHTTPStatus,
	// LastMessage) was given, Unix milliseconds; NULL when there is none
	// (never attempted, or requeued since). Setting it adds the answer to
	// the operation's OperationAttempt history (a trigger).
	LastAnswerAt *int64 `gorm:"column:last_answer_at;type:bigint"`
	Lock
	LeaseToken     *string `gorm:"column:lease_token"`
	LeaseExpiresAt *int64  `gorm:"column:lease_expires_at;type:bigint;index:kubun_connector_operation_flow_lease_idx,priority:3"`
	// EndedLeaseToken is the token of the lease the last lease-ending write
	// (commit, failure, dead, reconcile-only, release) ended; it lets a
	// holder's retry after a lost reply be told apart from a lost lease.
	EndedLeaseToken *string `gorm:"column:ended_lease_token"`
	CreatedAt       int64   `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false;index:kubun_connector_operation_doc_caller_idx,priority:3;index:kubun_connector_operation_doc_owner_idx,priority:3;index:kubun_connector_operation_owner_idx,priority:2"`
	UpdatedAt       int64   `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
	// Seq is the row's place in record order (migration 0019): the key of
	// the listing indexes and of their cursors, never the operation's
	// identity (that is CallerDID and OperationID). The database assigns
	// it (a sequence on PostgreSQL, a trigger on SQLite); gorm never writes
	// it. Rows recorded before 0019 have negative numbers, in their old
	// order. Zero on a row read back from an insert that did not return it.
	Seq int64 `gorm:"column:seq;type:bigint;->;index:kubun_connector_operation_state_key_idx,priority:2;index:kubun_connector_operation_owner_idx,priority:3;index:kubun_connector_operation_flow_doc_idx,priority:3"`
	// Flow is true for an operation whose account is under flow control
	// (migration 0020; see FlowAccount): such rows are claimed by account,
	// through indexes of their own, and never by the plain claim.
	// The database sets it on insert (a trigger: gorm leaves it out of an
	// INSERT); the repository's writes set it by column.
	Flow bool `gorm:"column:flow;type:boolean;<-:update;not null;default:false"`
	// Weight is how many units of its account's rate the operation costs
	// (migration 0021; OperationInput.Weight): 1 unless recorded otherwise.
	// Caps count operations, whatever their weight.
	Weight int64 `gorm:"column:weight;type:bigint;not null;default:1"`
}

// TableName returns the seed's table name.
func (Operation) TableName() string { return "kubun_connector_operation" }
