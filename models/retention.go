package models

// RetentionState is a row of kubun_connector_retention, where retention
// passes recorded when they began until migration 0013 replaced that with
// the queue of finished documents (RetentionFinished). Nothing writes it
// any more; the table stays so a rollback and older instances find it.
type RetentionState struct {
	Name            string `gorm:"column:name;primaryKey"`
	FinishedThrough int64  `gorm:"column:finished_through;type:bigint;not null"`
}

// TableName returns the table name.
func (RetentionState) TableName() string { return "kubun_connector_retention" }
