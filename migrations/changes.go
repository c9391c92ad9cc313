package migrations

import (
	"slices"
	"strings"

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

// retentionQueueMigration releases retention holds in commit order. A
// held row (one the keep rules kept) can become collectable only when a
// row on its document finishes later, or a finished row is linked to its
// document. A trigger writes that document to kubun_connector_retention_
// finished in the finishing statement's own transaction, so the entry
// becomes visible exactly when the finish commits, however long that
// transaction stays open; a pass consumes the queue (unscoped: a finish
// may supersede rows of any caller or owner on the document) and clears
// the holds on its documents before it judges rows. The earlier scheme
// compared updated_at with when the previous pass began, and missed
// finishes that committed after a pass but took their timestamp before it.
//
// Holds set under that scheme may be waiting for a release it would have
// missed: they are all cleared here (before the triggers exist), and the
// bounded passes judge the rows again. The unheld index becomes a partial
// index over the rows a pass judges (unheld, committed or dead), in pass
// order, so a pass's scan skips attempted and held rows instead of
// stepping over them.
// queueChange0013 are the columns whose change on a finished row queues its
// document in migration 0013: its state and its document.
var queueChange0013 = []string{"state", "document_id"}

// pgFinishedFunction queues the document of every row that finishes, or
// that changes one of changed while finished (a change that may supersede
// the rows a pass held on that document), and with keyMoves of every
// finished row whose key the statement changed. One statement-level trigger per
// statement, not one call per row: a batched commit of hundreds of rows
// writes the queue in one INSERT. Rows where none of changed moved (a
// heartbeat, a claim) write nothing.
func pgFinishedFunction(changed []string, keyMoves bool) string {
	var cond []string
	for _, c := range changed {
		cond = append(cond, "o."+c+" IS DISTINCT FROM n."+c)
	}
	// A row whose key the statement changed has no old row to be matched
	// with: it is queued as an insert is (since 0018).
	join := "JOIN"
	if keyMoves {
		join = "LEFT JOIN"
		cond = append([]string{"o.caller_did IS NULL"}, cond...)
	}
	return `CREATE OR REPLACE FUNCTION kubun_connector_operation_finished() RETURNS trigger
		LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'INSERT' THEN
				INSERT INTO kubun_connector_retention_finished (document_id)
				SELECT DISTINCT n.document_id FROM finished_new n
				WHERE n.state IN ('committed', 'dead') AND n.document_id IS NOT NULL;
			ELSE
				INSERT INTO kubun_connector_retention_finished (document_id)
				SELECT DISTINCT n.document_id FROM finished_new n
				` + join + ` finished_old o ON o.caller_did = n.caller_did AND o.operation_id = n.operation_id
				WHERE n.state IN ('committed', 'dead') AND n.document_id IS NOT NULL
					AND (` + strings.Join(cond, " OR ") + `);
			END IF;
			RETURN NULL;
		END $$`
}

// sqliteFinishedUpd is pgFinishedFunction's update rule for SQLite, a row
// at a time.
func sqliteFinishedUpd(changed []string) string {
	var cond []string
	for _, c := range changed {
		cond = append(cond, "OLD."+c+" IS NOT NEW."+c)
	}
	return `CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_finished_upd
		AFTER UPDATE OF ` + strings.Join(changed, ", ") + ` ON kubun_connector_operation
		FOR EACH ROW WHEN NEW.state IN ('committed', 'dead') AND NEW.document_id IS NOT NULL
			AND (` + strings.Join(cond, " OR ") + `)
		BEGIN INSERT INTO kubun_connector_retention_finished (document_id) VALUES (NEW.document_id); END`
}

func retentionQueueMigration() *gormigrate.Migration {
	const queue = "kubun_connector_retention_finished"
	return &gormigrate.Migration{
		ID: "connstore_0013_retention_queue",
		Migrate: func(tx *gorm.DB) error {
			stmts := []string{
				`UPDATE kubun_connector_operation SET retention_hold = NULL WHERE retention_hold IS NOT NULL`,
				`DROP INDEX IF EXISTS kubun_connector_operation_unheld_idx`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_collect_idx
					ON kubun_connector_operation (updated_at, caller_did, operation_id)
					WHERE retention_hold IS NULL AND state IN ('committed', 'dead')`,
				// A release finds the held rows of the queued documents here,
				// an index of held rows only.
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_held_idx
					ON kubun_connector_operation (document_id) WHERE retention_hold IS NOT NULL`,
			}
			if tx.Dialector.Name() == "postgres" {
				return execAll(tx, append(stmts,
					`CREATE TABLE IF NOT EXISTS `+queue+` (seq BIGSERIAL NOT NULL, document_id TEXT NOT NULL,
						CONSTRAINT `+queue+`_pkey PRIMARY KEY (seq))`,
					// One statement-level trigger per statement, not one
					// call per row: a batched commit of hundreds of rows
					// writes the queue in one INSERT. Rows whose state and
					// document did not change (a hold mark, a heartbeat)
					// write nothing.
					pgFinishedFunction(queueChange0013, false),
					`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_ins ON kubun_connector_operation`,
					`CREATE TRIGGER kubun_connector_operation_finished_ins AFTER INSERT ON kubun_connector_operation
						REFERENCING NEW TABLE AS finished_new
						FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_finished()`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_upd ON kubun_connector_operation`,
					`CREATE TRIGGER kubun_connector_operation_finished_upd AFTER UPDATE ON kubun_connector_operation
						REFERENCING OLD TABLE AS finished_old NEW TABLE AS finished_new
						FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_finished()`,
				))
			}
			return execAll(tx, append(stmts,
				`CREATE TABLE IF NOT EXISTS `+queue+` (seq INTEGER PRIMARY KEY AUTOINCREMENT, document_id TEXT NOT NULL)`,
				`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_finished_ins AFTER INSERT ON kubun_connector_operation
					FOR EACH ROW WHEN NEW.state IN ('committed', 'dead') AND NEW.document_id IS NOT NULL
					BEGIN INSERT INTO `+queue+` (document_id) VALUES (NEW.document_id); END`,
				sqliteFinishedUpd(queueChange0013),
			))
		},
		Rollback: func(tx *gorm.DB) error {
			stmts := []string{
				`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_ins`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_upd`,
			}
			if tx.Dialector.Name() == "postgres" {
				stmts = []string{
					`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_ins ON kubun_connector_operation`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_upd ON kubun_connector_operation`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_finished()`,
				}
			}
			return execAll(tx, append(stmts, `DROP TABLE IF EXISTS `+queue,
				`DROP INDEX IF EXISTS kubun_connector_operation_collect_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_held_idx`,
				`UPDATE kubun_connector_operation SET retention_hold = NULL WHERE retention_hold IS NOT NULL`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_unheld_idx
					ON kubun_connector_operation (retention_hold, updated_at, caller_did, operation_id)`))
		},
	}
}

// collectOwnerIndexMigration serves retention passes scoped to an owner
// (WithScopes by owner_did, the usual tenant key): the rows such a pass
// judges, in pass order, for one owner. Without it the pass read the
// judged-rows index in pass order and skipped every other owner's row: on
// a million rows of 100 owners, 120,000 rows read for a window of 400.
func collectOwnerIndexMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0014_collect_owner_index",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, []string{`CREATE INDEX IF NOT EXISTS kubun_connector_operation_collect_owner_idx
				ON kubun_connector_operation (owner_did, updated_at, caller_did, operation_id)
				WHERE retention_hold IS NULL AND state IN ('committed', 'dead')`})
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, []string{`DROP INDEX IF EXISTS kubun_connector_operation_collect_owner_idx`})
		},
	}
}

// leanOperationIndexMigration takes off the journal the index maintenance
// no statement pays back. Every claim and every finish writes a new version
// of its row, and each version is inserted into every index whose predicate
// it matches: index maintenance was most of the database's work per
// operation. The (state, next_attempt_at) index served claims before the
// claim index (0012) and the (state, updated_at) one retention passes
// before the judged-rows index (0013); nothing reads either any more. The
// keep rules look rows up by document only when there is one (a row without
// a document is collected without a probe), so the two document indexes
// hold only rows that have one: an operation recorded without a document
// (a create, until its commit names what it created) costs them nothing.
// Rolling back restores the indexes as they were.
func leanOperationIndexMigration() *gormigrate.Migration {
	docIndexes := func(where string) []string {
		return []string{
			`DROP INDEX IF EXISTS kubun_connector_operation_doc_caller_idx`,
			`DROP INDEX IF EXISTS kubun_connector_operation_doc_owner_idx`,
			`CREATE INDEX IF NOT EXISTS kubun_connector_operation_doc_caller_idx
				ON kubun_connector_operation (document_id, caller_did, created_at)` + where,
			`CREATE INDEX IF NOT EXISTS kubun_connector_operation_doc_owner_idx
				ON kubun_connector_operation (document_id, owner_did, created_at)` + where,
		}
	}
	return &gormigrate.Migration{
		ID: "connstore_0015_lean_operation_indexes",
		Migrate: func(tx *gorm.DB) error {
			return execAll(tx, append([]string{
				`DROP INDEX IF EXISTS kubun_connector_operation_due_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_retention_idx`,
			}, docIndexes(" WHERE document_id IS NOT NULL")...))
		},
		Rollback: func(tx *gorm.DB) error {
			return execAll(tx, append([]string{
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_due_idx
					ON kubun_connector_operation (state, next_attempt_at)`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_retention_idx
					ON kubun_connector_operation (state, updated_at)`,
			}, docIndexes("")...))
		},
	}
}

// journalKeyColumns are the journal's text columns its indexes order by (and
// connector_name, which the admin counts group and order by).
var journalKeyColumns = []string{"caller_did", "operation_id", "owner_did", "connector_name", "document_id", "state"}

// byteOrderMigration makes PostgreSQL compare the journal's identifier
// columns byte by byte (COLLATE "C"), as SQLite (BINARY) and Go
// (strings.Compare) already do. The columns hold DIDs, ids and states, not
// words: a locale's ordering is of no use to them, and every index insert
// and probe paid for it (strcoll on each comparison, a tenth of the
// server's work in the worker pool's claim and commit). Keyset pages over
// these columns (listings, the due sweep) now follow the same order on both
// databases. A partition key column (caller_did in PartitionedLayout, which
// declares it COLLATE "C" from the start) cannot change its collation and
// is left as it is. On SQLite it changes nothing. Only the indexes over
// these columns are rebuilt, not the table; a view over the journal's
// columns makes the ALTER fail, and the migration with it, unchanged.
func byteOrderMigration() *gormigrate.Migration {
	alter := func(tx *gorm.DB, collation string) error {
		if tx.Dialector.Name() != "postgres" {
			return nil
		}
		var partKeys []string
		if err := tx.Raw(`SELECT a.attname FROM pg_partitioned_table p
			JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = ANY (p.partattrs)
			WHERE p.partrelid = 'kubun_connector_operation'::regclass`).Scan(&partKeys).Error; err != nil {
			return err
		}
		var clauses []string
		for _, c := range journalKeyColumns {
			if !slices.Contains(partKeys, c) {
				clauses = append(clauses, "ALTER COLUMN "+c+" TYPE TEXT COLLATE "+collation)
			}
		}
		return tx.Exec("ALTER TABLE kubun_connector_operation " + strings.Join(clauses, ", ")).Error
	}
	return &gormigrate.Migration{
		ID:       "connstore_0016_journal_byte_order",
		Migrate:  func(tx *gorm.DB) error { return alter(tx, `"C"`) },
		Rollback: func(tx *gorm.DB) error { return alter(tx, `"default"`) },
	}
}
