package models

// RetentionHeld is a row of kubun_connector_retention_held: a finished
// operation a retention pass judged and kept, by document. A pass that keeps
// a row moves its entry here from RetentionPending; a later finish on the
// document (the queue of RetentionFinished) moves the document's entries
// back, so a release reads the document's held rows and nothing else. The
// triggers that keep RetentionPending take a row's entry out of here too
// when the row changes what retention judges (its state, updated_at, owner,
// connector or document) or is deleted: a held entry is always a row as it
// was kept.
type RetentionHeld struct {
	DocumentID    string `gorm:"column:document_id;primaryKey"`
	CallerDID     string `gorm:"column:caller_did;primaryKey"`
	OperationID   string `gorm:"column:operation_id;primaryKey"`
	UpdatedAt     int64  `gorm:"column:updated_at;type:bigint;not null;autoCreateTime:false;autoUpdateTime:false"`
	OwnerDID      string `gorm:"column:owner_did;not null"`
	ConnectorName string `gorm:"column:connector_name;not null"`
	// State is the row's state when it was held (committed and dead rows
	// have different keep rules).
	State string `gorm:"column:state;not null"`
}

// TableName returns the table name.
func (RetentionHeld) TableName() string { return "kubun_connector_retention_held" }
