package models

// OperationAttempt is a row of kubun_connector_operation_attempt: one
// answer in an operation's attempt history (migration 0023), for triage.
// Every answer the journal records as an operation's last one (a failed
// attempt, a pause on the provider's throttling, an end as dead or
// reconcile-only, an operator's cancel) is copied here by a trigger on the
// operation's last_answer_at, in the writing statement's own transaction;
// a commit records no answer and adds nothing. The newest
// AttemptHistoryLimit answers of an operation are kept, and they are
// deleted with their operation (a trigger on the journal's DELETE, so
// retention and an application's own delete alike remove them).
type OperationAttempt struct {
	// ID orders an operation's answers (the newest is the highest).
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement;index:kubun_connector_operation_attempt_op_idx,priority:3"`
	CallerDID   string `gorm:"column:caller_did;not null;index:kubun_connector_operation_attempt_op_idx,priority:1"`
	OperationID string `gorm:"column:operation_id;not null;index:kubun_connector_operation_attempt_op_idx,priority:2"`
	// At is when the answer was given, Unix milliseconds.
	At int64 `gorm:"column:answered_at;type:bigint;not null"`
	// Attempts is the operation's attempt count after the answer.
	Attempts int64 `gorm:"column:attempts;type:bigint;not null"`
	// State is the operation's state after the answer.
	State      string  `gorm:"column:state;not null"`
	Kind       *string `gorm:"column:kind"`
	HTTPStatus *int64  `gorm:"column:http_status;type:bigint"`
	Message    *string `gorm:"column:message"`
}

// AttemptHistoryLimit is how many answers an operation's history keeps:
// the newest, which is what triage reads; an operation retried for days
// does not grow its history without bound.
const AttemptHistoryLimit = 20

// TableName returns the table's name.
func (OperationAttempt) TableName() string { return "kubun_connector_operation_attempt" }
