package migrations

import (
	"slices"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// heldTable is the retention pass's table of held rows, by document.
const heldTable = "kubun_connector_retention_held"

// queueChange0018 are the columns whose change on a finished row queues its
// document since migration 0018: every column the keep rules compare, so a
// row moved to another owner (or caller, or place in the document's order)
// releases the rows it may now supersede there. Before, only a state or
// document change did, and a held row its owner's newer commit superseded
// by such a move stayed held.
var queueChange0018 = []string{"state", "document_id", "owner_did", "caller_did", "operation_id", "created_at"}

// heldChange is pendingChange with the document: a held row is kept by
// the keep rules of its document, so moving it to another one (or to none)
// has it judged again.
const heldChange = `(` + pendingChange + ` OR o.document_id IS DISTINCT FROM n.document_id)`

// retentionHeldMigration gives held rows a table of their own, keyed by
// document, and the rows to judge an order of their own. Since 0017 a held
// row was a finished row with no entry among the rows to judge, and a
// release (a finish on the document) put every finished row of the
// document back: after each finish on a document with 20,000 finished rows
// a pass read 40,000 rows to release none. Now a pass moves what it keeps
// into kubun_connector_retention_held, and a release moves the queued
// documents' entries back, reading those and nothing else.
//
// An entry's place in the pass order is its own column, ord: a finished
// row enters at its updated_at, as before, but a released row enters at the
// time of its release (capped below the releasing pass's cutoff, so that
// pass may judge it). At their old updated_at, released rows went to the
// head of the order: when more of them were released between two passes
// than one window holds, every pass re-judged and re-held the same kept
// rows and never reached the rows behind them, however collectable.
//
// The triggers that keep the rows to judge also take a row's held entry
// out when the row changes what retention judges, its document included,
// or is deleted; such a row is judged again. An entry a trigger writes
// over one with the same place takes the row as it now stands (a release's
// entry for an older version of it, committed meanwhile, would otherwise
// stand in for it and be dropped as stale).
//
// The held table starts with every finished row on a document that has no
// entry among the rows to judge, taken while the journal and that table
// are locked against writers and passes. Rolling back drops it (a held row
// is then again one without an entry, as 0017 has it) and orders the rows
// to judge by updated_at again, one entry per row version.
func retentionHeldMigration() *gormigrate.Migration {
	fill := `INSERT INTO ` + heldTable + ` (document_id, caller_did, operation_id, updated_at, owner_did, connector_name, state)
		SELECT j.document_id, j.caller_did, j.operation_id, j.updated_at, j.owner_did, j.connector_name, j.state
		FROM kubun_connector_operation j
		WHERE j.state IN ('committed', 'dead') AND j.document_id IS NOT NULL AND NOT EXISTS (
			SELECT 1 FROM ` + pendingTable + ` p
			WHERE p.updated_at = j.updated_at AND p.caller_did = j.caller_did AND p.operation_id = j.operation_id
				AND p.owner_did = j.owner_did AND p.connector_name = j.connector_name)`
	return &gormigrate.Migration{
		ID: "connstore_0018_retention_held",
		Migrate: func(tx *gorm.DB) error {
			if tx.Dialector.Name() != "postgres" {
				return execAll(tx, slices.Concat([]string{
					`CREATE TABLE IF NOT EXISTS ` + heldTable + ` (document_id TEXT NOT NULL, caller_did TEXT NOT NULL,
						operation_id TEXT NOT NULL, updated_at BIGINT NOT NULL, owner_did TEXT NOT NULL,
						connector_name TEXT NOT NULL, state TEXT NOT NULL,
						PRIMARY KEY (document_id, caller_did, operation_id)) WITHOUT ROWID`,
					fill,
				}, sqliteDropPendingTriggers,
					sqliteRebuildPending(`CREATE TABLE `+pendingTable+`_next (ord BIGINT NOT NULL, caller_did TEXT NOT NULL,
						operation_id TEXT NOT NULL, updated_at BIGINT NOT NULL, owner_did TEXT NOT NULL, connector_name TEXT NOT NULL,
						PRIMARY KEY (ord, caller_did, operation_id)) WITHOUT ROWID`,
						`INSERT INTO `+pendingTable+`_next (ord, caller_did, operation_id, updated_at, owner_did, connector_name)
						SELECT updated_at, caller_did, operation_id, updated_at, owner_did, connector_name FROM `+pendingTable,
						`(owner_did, ord, caller_did, operation_id)`),
					sqliteHeldTriggers,
					[]string{`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_upd`, sqliteFinishedUpd(queueChange0018)}))
			}
			return execAll(tx, []string{
				// Writers and passes wait until the migration commits: the
				// fill sees every hold, the new triggers every change after it.
				`LOCK TABLE kubun_connector_operation, ` + pendingTable + ` IN SHARE ROW EXCLUSIVE MODE`,
				`CREATE TABLE IF NOT EXISTS ` + heldTable + ` (document_id TEXT COLLATE "C" NOT NULL,
					caller_did TEXT COLLATE "C" NOT NULL, operation_id TEXT COLLATE "C" NOT NULL,
					updated_at BIGINT NOT NULL, owner_did TEXT COLLATE "C" NOT NULL,
					connector_name TEXT COLLATE "C" NOT NULL, state TEXT COLLATE "C" NOT NULL,
					CONSTRAINT ` + heldTable + `_pkey PRIMARY KEY (document_id, caller_did, operation_id))`,
				fill,
				`ALTER TABLE ` + pendingTable + ` ADD COLUMN ord BIGINT`,
				`UPDATE ` + pendingTable + ` SET ord = updated_at`,
				`ALTER TABLE ` + pendingTable + ` ALTER COLUMN ord SET NOT NULL`,
				`ALTER TABLE ` + pendingTable + ` DROP CONSTRAINT ` + pendingTable + `_pkey`,
				`ALTER TABLE ` + pendingTable + ` ADD CONSTRAINT ` + pendingTable + `_pkey PRIMARY KEY (ord, caller_did, operation_id)`,
				`DROP INDEX IF EXISTS ` + pendingTable + `_owner_idx`,
				`CREATE INDEX ` + pendingTable + `_owner_idx ON ` + pendingTable + ` (owner_did, ord, caller_did, operation_id)`,
				pgHeldFunction,
				pgFinishedFunction(queueChange0018, true),
			})
		},
		Rollback: func(tx *gorm.DB) error {
			// One entry per row version, at its updated_at: entries that no
			// longer record their row as it stands go first (a pass would
			// drop them as stale), so the one kept for a version is current.
			stale := `DELETE FROM ` + pendingTable + ` WHERE NOT EXISTS (SELECT 1 FROM kubun_connector_operation j
				WHERE j.caller_did = ` + pendingTable + `.caller_did AND j.operation_id = ` + pendingTable + `.operation_id
					AND j.updated_at = ` + pendingTable + `.updated_at AND j.owner_did = ` + pendingTable + `.owner_did
					AND j.connector_name = ` + pendingTable + `.connector_name AND j.state IN ('committed', 'dead'))`
			dedupe := `DELETE FROM ` + pendingTable + ` WHERE EXISTS (SELECT 1 FROM ` + pendingTable + ` b
				WHERE b.caller_did = ` + pendingTable + `.caller_did AND b.operation_id = ` + pendingTable + `.operation_id
					AND b.updated_at = ` + pendingTable + `.updated_at AND b.ord < ` + pendingTable + `.ord)`
			if tx.Dialector.Name() != "postgres" {
				// The copy keeps each version's first entry (INSERT OR IGNORE
				// in ord order): the correlated dedupe above is a range scan
				// per entry on SQLite, 44 s for 50,000 entries.
				return execAll(tx, slices.Concat(sqliteDropPendingTriggers, []string{stale, `DROP TABLE IF EXISTS ` + heldTable},
					sqliteRebuildPending(`CREATE TABLE `+pendingTable+`_next (updated_at INTEGER NOT NULL, caller_did TEXT NOT NULL,
						operation_id TEXT NOT NULL, owner_did TEXT NOT NULL, connector_name TEXT NOT NULL,
						PRIMARY KEY (updated_at, caller_did, operation_id)) WITHOUT ROWID`,
						`INSERT OR IGNORE INTO `+pendingTable+`_next (updated_at, caller_did, operation_id, owner_did, connector_name)
						SELECT updated_at, caller_did, operation_id, owner_did, connector_name FROM `+pendingTable+` ORDER BY ord`,
						`(owner_did, updated_at, caller_did, operation_id)`),
					sqlitePendingTriggers,
					[]string{`DROP TRIGGER IF EXISTS kubun_connector_operation_finished_upd`, sqliteFinishedUpd(queueChange0013)}))
			}
			return execAll(tx, []string{
				`LOCK TABLE kubun_connector_operation, ` + pendingTable + ` IN SHARE ROW EXCLUSIVE MODE`,
				pgPendingFunction,
				pgFinishedFunction(queueChange0013, false),
				stale,
				dedupe,
				`ALTER TABLE ` + pendingTable + ` DROP CONSTRAINT ` + pendingTable + `_pkey`,
				`ALTER TABLE ` + pendingTable + ` ADD CONSTRAINT ` + pendingTable + `_pkey PRIMARY KEY (updated_at, caller_did, operation_id)`,
				`DROP INDEX IF EXISTS ` + pendingTable + `_owner_idx`,
				`ALTER TABLE ` + pendingTable + ` DROP COLUMN ord`,
				`CREATE INDEX ` + pendingTable + `_owner_idx ON ` + pendingTable + ` (owner_did, updated_at, caller_did, operation_id)`,
				`DROP TABLE IF EXISTS ` + heldTable,
			})
		},
	}
}

// sqliteDropPendingTriggers drops the triggers that keep the rows to
// judge, before the table is rebuilt under them (SQLite rewrites a
// trigger's references to a renamed table).
var sqliteDropPendingTriggers = []string{
	`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_ins`,
	`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_upd`,
	`DROP TRIGGER IF EXISTS kubun_connector_operation_pending_del`,
}

// sqliteRebuildPending replaces the rows to judge with a table of another
// key (SQLite cannot change a WITHOUT ROWID table's): create is the new
// table under a temporary name, copy fills it, ownerIndex is the owner
// index's column list.
func sqliteRebuildPending(create, copy, ownerIndex string) []string {
	return []string{
		create, copy,
		`DROP TABLE ` + pendingTable,
		`ALTER TABLE ` + pendingTable + `_next RENAME TO ` + pendingTable,
		`CREATE INDEX ` + pendingTable + `_owner_idx ON ` + pendingTable + ` ` + ownerIndex,
	}
}

// pgHeldFunction is pgPendingFunction with the held rows: a change to a
// finished row (one that leaves the finished states included) or its
// delete takes its entry out of the rows to judge and out of the held
// rows, and a row finished as it is now enters the rows to judge. Each
// side runs only when the statement has such rows: a claim or a commit
// touches no finished row's entries and pays one look at its rows.
var pgHeldFunction = `CREATE OR REPLACE FUNCTION kubun_connector_operation_pending() RETURNS trigger
	LANGUAGE plpgsql SET enable_seqscan = off AS $$
	BEGIN
		IF TG_OP = 'INSERT' THEN
			` + entryInsert("pending_new n", "n.state IN ('committed', 'dead')") + `;
		ELSIF TG_OP = 'DELETE' THEN
			IF EXISTS (SELECT 1 FROM pending_old WHERE state IN ('committed', 'dead')) THEN
				` + entryDelete(pendingTable, pendingKey, "pending_old o", "o.state IN ('committed', 'dead')") + `;
				` + entryDelete(heldTable, heldKey, "pending_old o", "o.state IN ('committed', 'dead')") + `;
			END IF;
		ELSE
			IF EXISTS (SELECT 1 FROM pending_old WHERE state IN ('committed', 'dead')) THEN
				` + entryDelete(pendingTable, pendingKey, oldRows, "o.state IN ('committed', 'dead') AND "+changedOrMoved) + `;
				` + entryDelete(heldTable, heldKey, oldRows, "o.state IN ('committed', 'dead') AND "+changedOrMoved) + `;
			END IF;
			IF EXISTS (SELECT 1 FROM pending_new WHERE state IN ('committed', 'dead')) THEN
				` + entryInsert(newRows, "n.state IN ('committed', 'dead') AND "+changedOrMoved) + `;
			END IF;
		END IF;
		RETURN NULL;
	END $$`

// oldRows and newRows are an UPDATE's rows, old (o) and new (n), each
// beside its other version where the statement kept its key.
const (
	oldRows = "pending_old o LEFT JOIN pending_new n ON n.caller_did = o.caller_did AND n.operation_id = o.operation_id"
	newRows = "pending_new n LEFT JOIN pending_old o ON o.caller_did = n.caller_did AND o.operation_id = n.operation_id"
)

// changedOrMoved picks, among oldRows or newRows, the rows whose entries
// change: those that changed what retention judges (heldChange), and those
// whose key the statement changed (by SQL: an operation's caller or id),
// which have no version on the other side to be matched with: the trigger
// takes the old ones for deleted and the new ones for inserted. Matched on
// the key only, such a row kept its old entry, which a pass then dropped
// as stale, and got no entry of its own: never judged.
const changedOrMoved = "(o.caller_did IS NULL OR n.caller_did IS NULL OR " + heldChange + ")"

// entryInsert is the trigger's insert of an entry among the rows to judge
// for each row n of from that where picks, placed at its updated_at.
func entryInsert(from, where string) string {
	return `INSERT INTO ` + pendingTable + ` (ord, updated_at, caller_did, operation_id, owner_did, connector_name)
		SELECT n.updated_at, n.updated_at, n.caller_did, n.operation_id, n.owner_did, n.connector_name
		FROM ` + from + ` WHERE ` + where + `
		` + pendingUpsert
}

// pendingKey and heldKey match an entry t of the rows to judge, or of the
// held rows, to the row o it was written for, on the table's primary key.
const (
	pendingKey = "t.ord = o.updated_at AND t.caller_did = o.caller_did AND t.operation_id = o.operation_id"
	heldKey    = "t.document_id = o.document_id AND t.caller_did = o.caller_did AND t.operation_id = o.operation_id"
)

// entryDelete is the trigger's delete from table of the entries (matched
// by key) of the rows from has where picks. Each row's entry is a probe of
// the table's primary key, made per row (LATERAL, LIMIT 1: no planner can
// turn it into a scan of the table matched against the statement's rows),
// and the entries found are deleted by physical id. Written as a join, it
// was planned, with statistics gathered while the held rows were few, as
// a walk of every held entry matched against each of the statement's rows:
// 500,000 comparisons for a pass deleting 500 rows beside 1,000 held ones,
// 200 ms. Sequential scans are off for the function (SET above), so the
// probe cannot become one either.
//
// An entry another transaction holds locked is skipped, not waited for:
// only a retention pass locks entries without holding the row's lock (it
// releases a held entry, or rewrites a stale one, before it deletes rows),
// so waiting for it while holding the row deadlocked with the pass's own
// delete of the row. Either way the entry left behind no longer records
// the row as it stands (the row's change is why this delete runs), so no
// pass takes it for the row: a released one is dropped as stale, a held
// one never matches the row's held probe, and the row's own new entry is
// judged.
func entryDelete(table, key, from, where string) string {
	return `DELETE FROM ` + table + ` WHERE ctid = ANY (ARRAY(SELECT k.ctid FROM ` + from + `
		CROSS JOIN LATERAL (SELECT t.ctid FROM ` + table + ` t WHERE ` + key + ` LIMIT 1 FOR UPDATE SKIP LOCKED) k
		WHERE ` + where + `))`
}

// pendingUpsert is how a trigger's entry meets one in its place: it takes
// the row as it now stands.
const pendingUpsert = `ON CONFLICT (ord, caller_did, operation_id) DO UPDATE SET updated_at = excluded.updated_at,
	owner_did = excluded.owner_did, connector_name = excluded.connector_name`

// sqliteHeldTriggers are pgHeldFunction's rules, a row at a time.
var sqliteHeldTriggers = []string{
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_ins AFTER INSERT ON kubun_connector_operation
		FOR EACH ROW WHEN NEW.state IN ('committed', 'dead')
		BEGIN INSERT OR REPLACE INTO ` + pendingTable + ` (ord, updated_at, caller_did, operation_id, owner_did, connector_name)
			VALUES (NEW.updated_at, NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name); END`,
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_upd
		AFTER UPDATE OF state, updated_at, owner_did, connector_name, document_id, caller_did, operation_id
		ON kubun_connector_operation
		FOR EACH ROW WHEN (OLD.state IN ('committed', 'dead') OR NEW.state IN ('committed', 'dead'))
			AND (OLD.state IS NOT NEW.state OR OLD.updated_at IS NOT NEW.updated_at
				OR OLD.owner_did IS NOT NEW.owner_did OR OLD.connector_name IS NOT NEW.connector_name
				OR OLD.document_id IS NOT NEW.document_id OR OLD.caller_did IS NOT NEW.caller_did
				OR OLD.operation_id IS NOT NEW.operation_id)
		BEGIN
			DELETE FROM ` + pendingTable + ` WHERE ord = OLD.updated_at
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			DELETE FROM ` + heldTable + ` WHERE document_id = OLD.document_id
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			INSERT OR REPLACE INTO ` + pendingTable + ` (ord, updated_at, caller_did, operation_id, owner_did, connector_name)
				SELECT NEW.updated_at, NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name
				WHERE NEW.state IN ('committed', 'dead');
		END`,
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_pending_del AFTER DELETE ON kubun_connector_operation
		FOR EACH ROW WHEN OLD.state IN ('committed', 'dead')
		BEGIN
			DELETE FROM ` + pendingTable + ` WHERE ord = OLD.updated_at
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
			DELETE FROM ` + heldTable + ` WHERE document_id = OLD.document_id
				AND caller_did = OLD.caller_did AND operation_id = OLD.operation_id;
		END`,
}
