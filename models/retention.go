package models

// RetentionState is a row of kubun_connector_retention: when a retention
// pass last began, so the next one clears the holds only of documents whose
// rows finished since.
type RetentionState struct {
	Name            string `gorm:"column:name;primaryKey"`
	FinishedThrough int64  `gorm:"column:finished_through;type:bigint;not null"`
}

// TableName returns the table name.
func (RetentionState) TableName() string { return "kubun_connector_retention" }
