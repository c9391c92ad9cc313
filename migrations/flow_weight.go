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
// the rows it has already found by its indexes. A connector's row gets a
// hold (models.FlowAccount.HoldAccount): its rate kept for the account
// whose heavier operation waits for room.
func weightMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0021_operation_weight",
		Migrate: func(tx *gorm.DB) error {
			text := "TEXT"
			if tx.Dialector.Name() == "postgres" {
				text = `TEXT COLLATE "C"`
			}
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation ADD COLUMN weight BIGINT NOT NULL DEFAULT 1`,
				`ALTER TABLE ` + flowTable + ` ADD COLUMN hold_account ` + text,
				`ALTER TABLE ` + flowTable + ` ADD COLUMN hold_until BIGINT`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation DROP COLUMN weight`,
				`ALTER TABLE ` + flowTable + ` DROP COLUMN hold_account`, `ALTER TABLE ` + flowTable + ` DROP COLUMN hold_until`})
		},
	}
}

// eligibleOrderMigration keys the flow table's index of accounts to look
// at by the claim's whole order (eligible_at, connector, account) instead
// of eligible_at alone. Accounts share an eligible_at often (every account
// after adoption or a restart, every one woken in one millisecond, every
// one with nothing to do): with eligible_at alone a claim of 50 sorted the
// whole tie, 10,000 rows at 10,000 accounts (TestFlowClaimShapesAt1M);
// keyed by the order, it reads 50.
func eligibleOrderMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0022_flow_eligible_order",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP INDEX IF EXISTS ` + flowTable + `_eligible_idx`,
				`CREATE INDEX ` + flowTable + `_eligible_idx ON ` + flowTable + ` (eligible_at, connector_name, account_key) WHERE account_key <> ''`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP INDEX IF EXISTS ` + flowTable + `_eligible_idx`,
				`CREATE INDEX ` + flowTable + `_eligible_idx ON ` + flowTable + ` (eligible_at) WHERE account_key <> ''`})
		},
	}
}
