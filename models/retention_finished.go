package models

// RetentionFinished is a row of kubun_connector_retention_finished: a
// document on which an operation finished (became committed or dead, or
// was linked to the document finished). A trigger in the finishing
// statement's transaction writes it, so it becomes visible exactly when the
// finish commits; retention passes consume the queue and move its
// documents' held rows (RetentionHeld) back among the rows to judge
// (RetentionPending): the finish may now supersede the older ones a pass
// held.
type RetentionFinished struct {
	Seq        int64  `gorm:"column:seq;primaryKey;autoIncrement"`
	DocumentID string `gorm:"column:document_id;not null"`
}

// TableName returns the table name.
func (RetentionFinished) TableName() string { return "kubun_connector_retention_finished" }
