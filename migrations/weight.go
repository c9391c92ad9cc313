package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// weightMigration gives the journal a weight: how many units of its
// account's rate an operation costs (an API that charges by points: a
// search 10, a read 1). Every row before it costs 1, the column's default
// (a catalog change on PostgreSQL, no rewrite; SQLite adds a column with a
// constant default in place). No index: a flow claim reads the weight of
// the rows it has already found by its indexes.
func weightMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0021_operation_weight",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation ADD COLUMN weight BIGINT NOT NULL DEFAULT 1`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation DROP COLUMN weight`})
		},
	}
}
