package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// heldTable is the retention pass's table of held rows, by document.
const heldTable = "kubun_connector_retention_held"

// heldChange is pendingChange with the document: a held row is kept by
// the keep rules of its document, so moving it to another one (or to none)
// has it judged again.
const heldChange = `(` + pendingChange + ` OR o.document_id IS DISTINCT FROM n.document_id)`

// retentionHeldMigration gives held rows a table of their own, keyed by
// document. Since 0017 a held row was a finished row with no entry among
// the rows to judge, and a release (a finish on the document) put every
// finished row of the document back: after each finish on a document with
// 20,000 finished rows a pass read 40,000 rows to release none. Now a pass
// moves what it keeps into kubun_connector_retention_held, and a release
// moves the queued documents' entries back, reading those and nothing
// else. The triggers that keep the rows to judge also take a row's held
// entry out when the row changes what retention judges, its document
// included, or is deleted; such a row is judged again.
//
// The table starts with every finished row on a document that has no
// entry among the rows to judge, taken while the journal and that table
// are locked against writers and passes. Rolling back drops it: a held row
// is then again one without an entry, as 0017 has it.
func retentionHeldMigration() *gormigrate.Migration {
	fill := `INSERT INTO ` + heldTable + ` (document_id, caller_did, operation_id, updated_at, owner_did, connector_name)
		SELECT j.document_id, j.caller_did, j.operation_id, j.updated_at, j.owner_did, j.connector_name
		FROM kubun_connector_operation j
		WHERE j.state IN ('committed', 'dead') AND j.document_id IS NOT NULL AND NOT EXISTS (
			SELECT 1 FROM ` + pendingTable + ` p
			WHERE p.updated_at = j.updated_at AND p.caller_did = j.caller_did AND p.operation_id = j.operation_id)`
	return &gormigrate.Migration{
		ID: "connstore_0018_retention_held",
		Migrate: func(tx *gorm.DB) error {
			if tx.Dialector.Name() != "postgres" {
				return execAll(tx, append([]string{
					`CREATE TABLE IF NOT EXISTS ` + heldTable + ` (document_id TEXT NOT NULL, caller_did TEXT NOT NULL,
						operation_id TEXT NOT NULL, updated_at BIGINT NOT NULL, owner_did TEXT NOT NULL,
						connector_name TEXT NOT NULL,
						PRIMARY KEY (document_id, caller_did, operation_id)) WITHOUT ROWID`,
					fill,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del`,
				}, sqliteHeldTriggers...))
			}
			return execAll(tx, []string{
				// Writers and passes wait until the migration commits: the
				// fill sees every hold, the new triggers every change after it.
				`LOCK TABLE kubun_connector_operation, ` + pendingTable + ` IN SHARE ROW EXCLUSIVE MODE`,
				`CREATE TABLE IF NOT EXISTS ` + heldTable + ` (document_id TEXT COLLATE "C" NOT NULL,
					caller_did TEXT COLLATE "C" NOT NULL, operation_id TEXT COLLATE "C" NOT NULL,
					updated_at BIGINT NOT NULL, owner_did TEXT COLLATE "C" NOT NULL,
					connector_name TEXT COLLATE "C" NOT NULL,
					CONSTRAINT ` + heldTable + `_pkey PRIMARY KEY (document_id, caller_did, operation_id))`,
				fill,
				pgHeldFunction,
			})
		},
		Rollback: func(tx *gorm.DB) error {
			if tx.Dialector.Name() != "postgres" {
				return execAll(tx, append([]string{
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del`,
					`DROP TABLE IF EXISTS ` + heldTable,
				}, sqlitePendingTriggers[1:]...))
			}
			return execAll(tx, []string{pgPendingFunction, `DROP TABLE IF EXISTS ` + heldTable})
		},
	}
}

// pgHeldFunction is pgPendingFunction with the held rows: a change to a
// finished row (one that leaves the finished states included) or its
// delete takes its entry out of the rows to judge and out of the held
// rows, and a row finished as it is now enters the rows to judge. Each
// side runs only when the statement has such rows: a claim or a commit
// touches no finished row's entries and pays one look at its rows.
const pgHeldFunction = `CREATE OR REPLACE FUNCTION kubun_connector_operation_pending() RETURNS trigger
	LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'INSERT' THEN
			INSERT INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
			SELECT n.updated_at, n.caller_did, n.operation_id, n.owner_did, n.connector_name
			FROM pending_new n WHERE n.state IN ('committed', 'dead')
			ON CONFLICT DO NOTHING;
		ELSIF TG_OP = 'DELETE' THEN
			IF EXISTS (SELECT 1 FROM pending_old WHERE state IN ('committed', 'dead')) THEN
				DELETE FROM ` + pendingTable + ` p USING pending_old o
				WHERE o.state IN ('committed', 'dead')
					AND p.updated_at = o.updated_at AND p.caller_did = o.caller_did AND p.operation_id = o.operation_id;
				DELETE FROM ` + heldTable + ` h USING pending_old o
				WHERE o.state IN ('committed', 'dead')
					AND h.document_id = o.document_id AND h.caller_did = o.caller_did AND h.operation_id = o.operation_id;
			END IF;
		ELSE
			IF EXISTS (SELECT 1 FROM pending_old WHERE state IN ('committed', 'dead')) THEN
				DELETE FROM ` + pendingTable + ` p USING pending_old o
				JOIN pending_new n ON n.caller_did = o.caller_did AND n.operation_id = o.operation_id
				WHERE o.state IN ('committed', 'dead') AND ` + heldChange + `
					AND p.updated_at = o.updated_at AND p.caller_did = o.caller_did AND p.operation_id = o.operation_id;
				DELETE FROM ` + heldTable + ` h USING pending_old o
				JOIN pending_new n ON n.caller_did = o.caller_did AND n.operation_id = o.operation_id
				WHERE o.state IN ('committed', 'dead') AND ` + heldChange + `
					AND h.document_id = o.document_id AND h.caller_did = o.caller_did AND h.operation_id = o.operation_id;
			END IF;
			IF EXISTS (SELECT 1 FROM pending_new WHERE state IN ('committed', 'dead')) THEN
				INSERT INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
				SELECT n.updated_at, n.caller_did, n.operation_id, n.owner_did, n.connector_name
				FROM pending_new n JOIN pending_old o ON o.caller_did = n.caller_did AND o.operation_id = n.operation_id
				WHERE n.state IN ('committed', 'dead') AND ` + heldChange + `
				ON CONFLICT DO NOTHING;
			END IF;
		END IF;
		RETURN NULL;
	END $$`

// sqliteHeldTriggers are pgHeldFunction's rules for the update and delete
// triggers, a row at a time (the insert trigger is 0017's).
var sqliteHeldTriggers = []string{
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_upd
		AFTER UPDATE OF state, updated_at, owner_did, connector_name, document_id ON kubun_connector_operation
		FOR EACH ROW WHEN (OLD.state IN ('committed', 'dead') OR NEW.state IN ('committed', 'dead'))
			AND (OLD.state IS NOT NEW.state OR OLD.updated_at IS NOT NEW.updated_at
				OR OLD.owner_did IS NOT NEW.owner_did OR OLD.connector_name IS NOT NEW.connector_name
				OR OLD.document_id IS NOT NEW.document_id)
		BEGIN
			DELETE FROM ` + pendingTable + ` WHERE updated_at = OLD.updated_at
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			DELETE FROM ` + heldTable + ` WHERE document_id = OLD.document_id
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			INSERT OR IGNORE INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
				SELECT NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name
				WHERE NEW.state IN ('committed', 'dead');
		END`,
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_del AFTER DELETE ON kubun_connector_operation
		FOR EACH ROW WHEN OLD.state IN ('committed', 'dead')
		BEGIN
			DELETE FROM ` + pendingTable + ` WHERE updated_at = OLD.updated_at
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			DELETE FROM ` + heldTable + ` WHERE document_id = OLD.document_id
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
		END`,
}
