package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// pendingTable is the retention pass's queue of finished rows to judge.
const pendingTable = "kubun_connector_retention_pending"

// pendingChange is, for a row o that becomes n, whether its entry changes:
// a retention pass judges a row as it stands, so a finished row whose state
// (committed and dead have different keep rules), updated_at (the cutoff
// and the pass order) or owner and connector (what a scoped pass sees)
// change is judged again.
const pendingChange = `(o.state <> n.state OR o.updated_at <> n.updated_at
	OR o.owner_did <> n.owner_did OR o.connector_name <> n.connector_name)`

// retentionPendingMigration replaces the hold mark on the journal with a
// table of the rows a pass has still to judge. A hold wrote a new version
// of the operation, inserted into six of the journal's indexes at the
// places its owner, document and key sort to: about four new pages per
// held row on a large journal, each a full-page image in the WAL after a
// checkpoint, so a pass's cost grew with the journal. Now a finished row
// enters kubun_connector_retention_pending (a trigger, in the finishing
// statement's own transaction), a pass reads its window there in pass
// order and holds what the keep rules keep by deleting their entries,
// which sit side by side at the head of the table; the release of a
// finished document puts its finished rows back. The journal loses the
// hold column and the three indexes over it (the judged rows, the same per
// owner, the held rows by document); the new table has the first two as
// its primary key and its owner index, over narrow entries.
//
// The table starts with every finished row not held, taken while the
// journal is locked against writers (a finish committing between the copy
// and the triggers would otherwise never be judged); held rows stay out of
// it, and those a queued finish released come back with the next pass's
// release. Rolling back restores the column and its indexes, with every
// row unheld (the bounded passes judge them again), and drops the table.
func retentionPendingMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0017_retention_pending",
		Migrate: func(tx *gorm.DB) error {
			fill := `INSERT INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
				SELECT updated_at, caller_did, operation_id, owner_did, connector_name FROM kubun_connector_operation
				WHERE state IN ('committed', 'dead') AND retention_hold IS NULL`
			drop := []string{
				`DROP INDEX IF EXISTS kubun_connector_operation_collect_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_collect_owner_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_held_idx`,
				`ALTER TABLE kubun_connector_operation DROP COLUMN retention_hold`,
			}
			if tx.Dialector.Name() != "postgres" {
				stmts := []string{
					`CREATE TABLE IF NOT EXISTS ` + pendingTable + ` (updated_at INTEGER NOT NULL, caller_did TEXT NOT NULL,
						operation_id TEXT NOT NULL, owner_did TEXT NOT NULL, connector_name TEXT NOT NULL,
						PRIMARY KEY (updated_at, caller_did, operation_id)) WITHOUT ROWID`,
					`CREATE INDEX IF NOT EXISTS ` + pendingTable + `_owner_idx
						ON ` + pendingTable + ` (owner_did, updated_at, caller_did, operation_id)`,
					fill,
				}
				return execAll(tx, append(append(stmts, sqlitePendingTriggers...), drop...))
			}
			return execAll(tx, append([]string{
				// Writers wait until the migration commits; the triggers
				// see every finish after the copy.
				`LOCK TABLE kubun_connector_operation IN SHARE ROW EXCLUSIVE MODE`,
				`CREATE TABLE IF NOT EXISTS ` + pendingTable + ` (updated_at BIGINT NOT NULL,
					caller_did TEXT COLLATE "C" NOT NULL, operation_id TEXT COLLATE "C" NOT NULL,
					owner_did TEXT COLLATE "C" NOT NULL, connector_name TEXT COLLATE "C" NOT NULL,
					CONSTRAINT ` + pendingTable + `_pkey PRIMARY KEY (updated_at, caller_did, operation_id))`,
				`CREATE INDEX IF NOT EXISTS ` + pendingTable + `_owner_idx
					ON ` + pendingTable + ` (owner_did, updated_at, caller_did, operation_id)`,
				fill,
				pgPendingFunction,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_ins ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_pending_ins AFTER INSERT ON kubun_connector_operation
					REFERENCING NEW TABLE AS pending_new
					FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_pending()`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_pending_upd AFTER UPDATE ON kubun_connector_operation
					REFERENCING OLD TABLE AS pending_old NEW TABLE AS pending_new
					FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_pending()`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_pending_del AFTER DELETE ON kubun_connector_operation
					REFERENCING OLD TABLE AS pending_old
					FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_pending()`,
			}, drop...))
		},
		Rollback: func(tx *gorm.DB) error {
			stmts := []string{
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_ins`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del`,
			}
			if tx.Dialector.Name() == "postgres" {
				stmts = []string{
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_ins ON kubun_connector_operation`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd ON kubun_connector_operation`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del ON kubun_connector_operation`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_pending()`,
				}
			}
			return execAll(tx, append(stmts,
				`DROP TABLE IF EXISTS `+pendingTable,
				`ALTER TABLE kubun_connector_operation ADD COLUMN retention_hold INTEGER`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_collect_idx
					ON kubun_connector_operation (updated_at, caller_did, operation_id)
					WHERE retention_hold IS NULL AND state IN ('committed', 'dead')`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_held_idx
					ON kubun_connector_operation (document_id) WHERE retention_hold IS NOT NULL`,
				`CREATE INDEX IF NOT EXISTS kubun_connector_operation_collect_owner_idx
					ON kubun_connector_operation (owner_did, updated_at, caller_did, operation_id)
					WHERE retention_hold IS NULL AND state IN ('committed', 'dead')`,
			))
		},
	}
}

// pgPendingFunction keeps kubun_connector_retention_pending equal to the
// finished rows not held, once per statement (a batched commit of hundreds
// of rows writes its entries in one INSERT). An UPDATE that finishes or
// changes nothing retention judges (a claim, a heartbeat, a failure that
// stays attempted) touches no finished row, and returns after looking at
// the statement's rows once.
const pgPendingFunction = `CREATE OR REPLACE FUNCTION kubun_connector_operation_pending() RETURNS trigger
	LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'INSERT' THEN
			INSERT INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
			SELECT n.updated_at, n.caller_did, n.operation_id, n.owner_did, n.connector_name
			FROM pending_new n WHERE n.state IN ('committed', 'dead')
			ON CONFLICT DO NOTHING;
		ELSIF TG_OP = 'DELETE' THEN
			DELETE FROM ` + pendingTable + ` p USING pending_old o
			WHERE o.state IN ('committed', 'dead')
				AND p.updated_at = o.updated_at AND p.caller_did = o.caller_did AND p.operation_id = o.operation_id;
		ELSIF EXISTS (SELECT 1 FROM pending_new WHERE state IN ('committed', 'dead'))
			OR EXISTS (SELECT 1 FROM pending_old WHERE state IN ('committed', 'dead')) THEN
			DELETE FROM ` + pendingTable + ` p USING pending_old o
			JOIN pending_new n ON n.caller_did = o.caller_did AND n.operation_id = o.operation_id
			WHERE o.state IN ('committed', 'dead') AND ` + pendingChange + `
				AND p.updated_at = o.updated_at AND p.caller_did = o.caller_did AND p.operation_id = o.operation_id;
			INSERT INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
			SELECT n.updated_at, n.caller_did, n.operation_id, n.owner_did, n.connector_name
			FROM pending_new n JOIN pending_old o ON o.caller_did = n.caller_did AND o.operation_id = n.operation_id
			WHERE n.state IN ('committed', 'dead') AND ` + pendingChange + `
			ON CONFLICT DO NOTHING;
		END IF;
		RETURN NULL;
	END $$`

// sqlitePendingTriggers are pgPendingFunction's rules, a row at a time.
var sqlitePendingTriggers = []string{
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_ins AFTER INSERT ON kubun_connector_operation
		FOR EACH ROW WHEN NEW.state IN ('committed', 'dead')
		BEGIN INSERT OR IGNORE INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
			VALUES (NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name); END`,
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_upd
		AFTER UPDATE OF state, updated_at, owner_did, connector_name ON kubun_connector_operation
		FOR EACH ROW WHEN (OLD.state IN ('committed', 'dead') OR NEW.state IN ('committed', 'dead'))
			AND (OLD.state IS NOT NEW.state OR OLD.updated_at IS NOT NEW.updated_at
				OR OLD.owner_did IS NOT NEW.owner_did OR OLD.connector_name IS NOT NEW.connector_name)
		BEGIN
			DELETE FROM ` + pendingTable + ` WHERE updated_at = OLD.updated_at
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			INSERT OR IGNORE INTO ` + pendingTable + ` (updated_at, caller_did, operation_id, owner_did, connector_name)
				SELECT NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name
				WHERE NEW.state IN ('committed', 'dead');
		END`,
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_del AFTER DELETE ON kubun_connector_operation
		FOR EACH ROW WHEN OLD.state IN ('committed', 'dead')
		BEGIN DELETE FROM ` + pendingTable + ` WHERE updated_at = OLD.updated_at
			AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id; END`,
}
