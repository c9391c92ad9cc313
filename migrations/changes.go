package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Changes after the initial schema, one migration each, frozen like it.

// endedLeaseMigration adds the token of the lease that the last
// lease-ending write (commit, failure, dead, reconcile-only, release) ended,
// so a retry of that write by the same holder after a lost reply is
// recognised as a replay instead of a lost lease.
func endedLeaseMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0006_operation_ended_lease",
		Migrate: func(tx *gorm.DB) error {
			if tx.Migrator().HasColumn("kubun_connector_operation", "ended_lease_token") {
				return nil // an adopted table that has it already
			}
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation ADD COLUMN ended_lease_token TEXT`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`ALTER TABLE kubun_connector_operation DROP COLUMN ended_lease_token`})
		},
	}
}

// candidatePagingMigration replaces the candidate listing index on the
// mutable updated_at with the keys ListSweepCandidates pages on: the primary
// key for a full listing, (next_attempt_at, key) for a due listing.
func candidatePagingMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0007_candidate_paging",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{
				`DROP INDEX IF EXISTS kubun_connector_sweep_candidate_list_idx`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_sweep_candidate_due_idx
					ON kubun_connector_sweep_candidate
					(owner_did, connector_name, next_attempt_at, "partition", provenance, document_id)`,
			})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{
				`DROP INDEX kubun_connector_sweep_candidate_due_idx`,
				`CREATE INDEX kubun_connector_sweep_candidate_list_idx
					ON kubun_connector_sweep_candidate
					(owner_did, connector_name, updated_at, document_id, "partition", provenance)`,
			})
		},
	}
}

// receiptSequenceIndexMigration gives the receipt's (partition, sequence)
// uniqueness the same name on SQLite that its constraint's index has on
// PostgreSQL, so the models can declare it and AutoMigrate finds it. SQLite
// names a UNIQUE constraint's index itself; the named index duplicates it on
// a table of one row per relist.
func receiptSequenceIndexMigration() *gormigrate.Migration {
	onSQLite := func(tx *gorm.DB, stmt string) error {
		if tx.Dialector.Name() != "sqlite" {
			return nil
		}
		return tx.Exec(stmt).Error
	}
	return &gormigrate.Migration{
		ID: "connstore_0008_receipt_sequence_index",
		Migrate: func(tx *gorm.DB) error {
			return onSQLite(tx, `CREATE UNIQUE INDEX IF NOT EXISTS kubun_connector_sweep_receipt_sequence_key
				ON kubun_connector_sweep_receipt (owner_did, connector_name, "partition", sequence)`)
		},
		Rollback: func(tx *gorm.DB) error {
			return onSQLite(tx, `DROP INDEX kubun_connector_sweep_receipt_sequence_key`)
		},
	}
}

// retentionHoldMigration lets retention skip the rows its keep rules keep:
// a hold mark on the operation, an index over unheld rows in collection
// order, and the table recording when the last pass began.
func retentionHoldMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0009_retention_hold",
		Migrate: func(tx *gorm.DB) error {
			var ddl []string
			if !tx.Migrator().HasColumn("kubun_connector_operation", "retention_hold") {
				ddl = append(ddl, `ALTER TABLE kubun_connector_operation ADD COLUMN retention_hold INTEGER`)
			}
			return execAll(tx, append(ddl,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_unheld_idx
					ON kubun_connector_operation (retention_hold, updated_at, caller_did, operation_id)`,
				`CREATE TABLE IF NOT EXISTS kubun_connector_retention (
					name TEXT NOT NULL,
					finished_through BIGINT NOT NULL,
					CONSTRAINT kubun_connector_retention_pkey PRIMARY KEY (name)
				)`))
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP TABLE IF EXISTS kubun_connector_retention`,
				`DROP INDEX IF EXISTS kubun_connector_operation_unheld_idx`,
				`ALTER TABLE kubun_connector_operation DROP COLUMN retention_hold`})
		},
	}
}

// dropLeaseIndexMigration drops the index on lease_expires_at. No query
// reads through it (the claim finds due rows by (state, next_attempt_at) and
// checks the lease on the row), and every claim, heartbeat and finish writes
// a new entry into it: on a busy journal it cost index upkeep for nothing.
func dropLeaseIndexMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0010_drop_lease_index",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP INDEX IF EXISTS kubun_connector_operation_lease_idx`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`CREATE INDEX IF NOT EXISTS kubun_connector_operation_lease_idx
				ON kubun_connector_operation (lease_expires_at)`})
		},
	}
}

// NotifyChannel is the PostgreSQL channel a recorded operation is announced
// on (see recordNotifyMigration); the payload is the schema of the
// operation table, so pools on other schemas of one database ignore it.
const NotifyChannel = "connstore_operation_recorded"

// recordNotifyMigration announces recorded operations on PostgreSQL: a
// statement-level trigger on INSERT sends NOTIFY, which PostgreSQL delivers
// only when the inserting transaction commits (a rolled-back recording wakes
// nobody) and sends once per transaction however many rows or statements it
// inserted. Idle worker pools LISTEN and claim at once instead of waiting
// for their next poll. SQLite has no such thing: pools there poll.
func recordNotifyMigration() *gormigrate.Migration {
	onPostgres := func(tx *gorm.DB, statements []string) error {
		if tx.Dialector.Name() != "postgres" {
			return nil
		}
		return execAll(tx, statements)
	}
	return &gormigrate.Migration{
		ID: "connstore_0011_record_notify",
		Migrate: func(tx *gorm.DB) error {
			return onPostgres(tx, []string{
				`CREATE OR REPLACE FUNCTION kubun_connector_operation_notify() RETURNS trigger
					LANGUAGE plpgsql AS $$
					BEGIN
						PERFORM pg_notify('` + NotifyChannel + `', TG_TABLE_SCHEMA);
						RETURN NULL;
					END $$`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_notify ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_notify AFTER INSERT ON kubun_connector_operation
					FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_notify()`,
			})
		},
		Rollback: func(tx *gorm.DB) error {
			return onPostgres(tx, []string{
				`DROP TRIGGER IF EXISTS kubun_connector_operation_notify ON kubun_connector_operation`,
				`DROP FUNCTION IF EXISTS kubun_connector_operation_notify()`,
			})
		},
	}
}

// claimIndexMigration gives the claim one ordered index range: attempted
// rows only, by their effective due time (the next attempt time, or when a
// row has none, the time it was recorded). The claim reads it from the
// earliest due row and stops at its limit; nothing due is one probe. Two
// branches over (state, next_attempt_at), one for NULL, let a planner with
// lagging statistics scan the whole table for the NULL branch. The state is
// written as a literal so both databases match the predicate to the claim's.
func claimIndexMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0012_claim_index",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{`CREATE INDEX IF NOT EXISTS kubun_connector_operation_claim_idx
				ON kubun_connector_operation ((COALESCE(next_attempt_at, created_at)))
				WHERE state = 'attempted'`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP INDEX IF EXISTS kubun_connector_operation_claim_idx`})
		},
	}
}
