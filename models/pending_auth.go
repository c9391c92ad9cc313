package models

// PendingAuth is a row of kubun_connector_pending_auth: an OAuth (PKCE)
// authorization in flight, keyed by its state parameter.
type PendingAuth struct {
	State string `gorm:"column:state;primaryKey"`
	// CodeVerifier is the PKCE verifier; it prints as [redacted].
	CodeVerifier  Secret `gorm:"column:code_verifier;not null"`
	OwnerDID      string `gorm:"column:owner_did;not null"`
	ConnectorName string `gorm:"column:connector_name;not null"`
	RedirectURI   string `gorm:"column:redirect_uri;not null"`
	// Scopes is the JSON array of requested scopes (decoded from text or
	// from an already-parsed value, as the seed's consumePendingAuth does).
	Scopes     JSON   `gorm:"column:scopes"`
	CreatedAt  int64  `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false"`
	ExpiresAt  int64  `gorm:"column:expires_at;type:bigint;not null;index:kubun_connector_pending_auth_expires_idx,priority:1"`
	ConsumedAt *int64 `gorm:"column:consumed_at;type:bigint"`
}

// TableName returns the table name.
func (PendingAuth) TableName() string { return "kubun_connector_pending_auth" }

// All lists every model, in creation order; useful for schema checks.
func All() []any {
	return []any{
		&SyncState{}, &Operation{}, &ProjectionWatch{},
		&SweepReceipt{}, &SweepCandidate{}, &SweepCheckpoint{}, &PendingAuth{}, &RetentionState{}, &RetentionFinished{},
		&RetentionPending{}, &RetentionHeld{}, &FlowAccount{}, &OperationAttempt{},
	}
}
