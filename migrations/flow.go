package migrations

import (
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// flowTable holds the flow control of provider accounts (see models.FlowAccount).
const flowTable = "kubun_connector_flow_account"

// The journal's claim indexes once flow control exists: the plain claim's
// (rows of accounts under no flow control), and the flow claim's, by
// account and in due order, and the live leases by account.
const (
	claimPredicate0020 = `state = 'attempted' AND NOT flow`
	flowPredicate      = `state = 'attempted' AND flow`
)

// flowMigration adds flow control: the table of accounts' limits and state,
// the journal's flow column (an operation whose account is under flow
// control), and the claim indexes split in two. The plain claim's index
// holds only rows under no flow control, so a claim of unlimited work
// never reads a limited account's rows, however many are due; the flow
// claim reads an account's due rows from an index keyed by the account,
// and counts its live leases from one that holds only leased rows. Rows of
// an account under no flow control write no entry in the flow indexes (a
// partial index's predicate is false for them), so the plain claim's cost
// is what it was.
//
// Both databases: the column is added with a default (a catalog change on
// PostgreSQL, no rewrite); the claim index is rebuilt in the migration's
// transaction, blocking writes to the journal while it builds, as 0015's
// indexes did.
func flowMigration() *gormigrate.Migration {
	text := "TEXT"
	return &gormigrate.Migration{
		ID: "connstore_0020_flow_control",
		Migrate: func(tx *gorm.DB) error {
			t := text
			if tx.Dialector.Name() == "postgres" {
				t = `TEXT COLLATE "C"`
			}
			triggers := sqliteFlowTriggers
			if tx.Dialector.Name() == "postgres" {
				triggers = pgFlowTriggers
			}
			return execAll(tx, append([]string{
				// One line: gorm's SQLite migrator reads a table's columns back
				// from its CREATE statement.
				`CREATE TABLE IF NOT EXISTS ` + flowTable + ` (connector_name ` + t + ` NOT NULL, account_key ` + t + ` NOT NULL, ` +
					`max_in_flight BIGINT, rate BIGINT, period_ms BIGINT, burst BIGINT, ` +
					`adaptive BOOLEAN NOT NULL DEFAULT false, grow_after BIGINT, fair BOOLEAN NOT NULL DEFAULT false, ordered BOOLEAN NOT NULL DEFAULT false, ` +
					`paused_until BIGINT, live_cap BIGINT, successes BIGINT NOT NULL DEFAULT 0, last_decrease_at BIGINT, ` +
					`tat_us BIGINT NOT NULL DEFAULT 0, eligible_at BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL DEFAULT 0, ` +
					`PRIMARY KEY (connector_name, account_key))`,
				`CREATE INDEX IF NOT EXISTS ` + flowTable + `_eligible_idx ON ` + flowTable + ` (eligible_at) WHERE account_key <> ''`,
				`ALTER TABLE kubun_connector_operation ADD COLUMN flow BOOLEAN NOT NULL DEFAULT false`,
				`DROP INDEX IF EXISTS kubun_connector_operation_claim_idx`,
				`CREATE INDEX kubun_connector_operation_claim_idx ON kubun_connector_operation
					(COALESCE(next_attempt_at, created_at)) WHERE ` + claimPredicate0020,
				`CREATE INDEX kubun_connector_operation_flow_idx ON kubun_connector_operation
					(connector_name, account_key, COALESCE(next_attempt_at, created_at)) WHERE ` + flowPredicate,
				`CREATE INDEX kubun_connector_operation_flow_due_idx ON kubun_connector_operation
					(COALESCE(next_attempt_at, created_at)) WHERE ` + flowPredicate,
				`CREATE INDEX kubun_connector_operation_flow_lease_idx ON kubun_connector_operation
					(connector_name, account_key, lease_expires_at) WHERE ` + flowPredicate + ` AND lease_token IS NOT NULL`,
				`CREATE INDEX kubun_connector_operation_flow_doc_idx ON kubun_connector_operation
					(connector_name, document_id, seq) WHERE ` + flowPredicate + ` AND document_id IS NOT NULL`,
			}, triggers...))
		},
		Rollback: func(tx *gorm.DB) error {
			drop := []string{`DROP TRIGGER IF EXISTS kubun_connector_operation_flow_ins`}
			if tx.Dialector.Name() == "postgres" {
				drop = []string{`DROP TRIGGER IF EXISTS kubun_connector_operation_flow_ins ON kubun_connector_operation`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_flow_wake ON kubun_connector_operation`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_flow()`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_flow_wake()`}
			}
			return execAll(tx, append(drop, []string{
				`DROP INDEX IF EXISTS kubun_connector_operation_flow_doc_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_flow_lease_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_flow_due_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_flow_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_claim_idx`,
				`ALTER TABLE kubun_connector_operation DROP COLUMN flow`,
				`CREATE INDEX kubun_connector_operation_claim_idx ON kubun_connector_operation
					(COALESCE(next_attempt_at, created_at)) WHERE state = 'attempted'`,
				`DROP TABLE IF EXISTS ` + flowTable,
			}...))
		},
	}
}

// flowControlled is a new journal row NEW whose account, or its connector,
// is under flow control.
const flowControlled = `EXISTS (SELECT 1 FROM ` + flowTable + ` f WHERE f.connector_name = NEW.connector_name
	AND f.account_key IN (NEW.account_key, ''))`

// flowAccountOf makes sure the account of a new flow row has its row (a
// connector under flow control brings its accounts in as they get work)
// and wakes it: a claim looks at it from the row's due time on, or when its
// pause ends. The wake changes the account's row only when it would move
// eligible_at earlier, so a record of an account already waiting to be
// served takes no lock on it.
const flowAccountOf = `INSERT INTO ` + flowTable + ` (connector_name, account_key, eligible_at)
		VALUES (NEW.connector_name, NEW.account_key, COALESCE(NEW.next_attempt_at, NEW.created_at))
		ON CONFLICT (connector_name, account_key) DO NOTHING;
	UPDATE ` + flowTable + ` SET eligible_at = COALESCE(NEW.next_attempt_at, NEW.created_at)
		WHERE connector_name = NEW.connector_name AND account_key = NEW.account_key
			AND eligible_at > COALESCE(NEW.next_attempt_at, NEW.created_at)
			AND (paused_until IS NULL OR paused_until <= COALESCE(NEW.next_attempt_at, NEW.created_at));`

// OrderLockNamespace is the advisory lock key's first half for the records
// of one document of an ordered connector (the migration lock's namespace
// is advisoryNamespace).
const OrderLockNamespace = advisoryNamespace + 20

// pgFlowTriggers put a new row of an account under flow control under it as
// it is inserted (before, so it never enters the plain claim's index), by
// the repository or by the application's own INSERT, and wake its account.
// Rows of accounts under no flow control pay one probe of the flow table's
// primary key; the wake runs only for flow rows (its WHEN).
//
// A row of a document of an ordered connector takes its seq under a lock
// of the document held to its transaction's end: seq is the order its
// claims follow, and a sequence's numbers are taken in one order and
// committed in another, so without the lock an update recorded later could
// commit first, be claimed, and reach the provider before an earlier one.
// With it, records of one document commit in seq order. (SQLite has one
// writer: its seqs are taken in commit order already.)
var pgFlowTriggers = []string{
	`CREATE OR REPLACE FUNCTION kubun_connector_operation_flow() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		ord boolean;
	BEGIN
		IF NOT NEW.flow AND NEW.state = 'attempted' THEN
			SELECT bool_or(f.ordered) INTO ord FROM ` + flowTable + ` f
				WHERE f.connector_name = NEW.connector_name AND f.account_key IN (NEW.account_key, '');
			IF ord IS NOT NULL THEN
				NEW.flow := true;
			END IF;
			IF ord AND NEW.document_id IS NOT NULL THEN
				PERFORM pg_advisory_xact_lock(` + fmt.Sprint(OrderLockNamespace) + `, hashtext(NEW.connector_name || '/' || NEW.document_id));
				NEW.seq := nextval('` + seqSequence + `');
			END IF;
		END IF;
		RETURN NEW;
	END $$`,
	`CREATE TRIGGER kubun_connector_operation_flow_ins BEFORE INSERT ON kubun_connector_operation
		FOR EACH ROW EXECUTE FUNCTION kubun_connector_operation_flow()`,
	`CREATE OR REPLACE FUNCTION kubun_connector_operation_flow_wake() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		` + flowAccountOf + `
		RETURN NULL;
	END $$`,
	`CREATE TRIGGER kubun_connector_operation_flow_wake AFTER INSERT ON kubun_connector_operation
		FOR EACH ROW WHEN (NEW.flow AND NEW.state = 'attempted') EXECUTE FUNCTION kubun_connector_operation_flow_wake()`,
}

// sqliteFlowTriggers are pgFlowTriggers' rules after the insert (SQLite's
// triggers cannot change NEW): the row is moved under flow control in the
// inserting statement, before any claim can see it.
var sqliteFlowTriggers = []string{
	`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_flow_ins AFTER INSERT ON kubun_connector_operation
		FOR EACH ROW WHEN NOT NEW.flow AND NEW.state = 'attempted' AND ` + flowControlled + `
		BEGIN
			UPDATE kubun_connector_operation SET flow = 1 WHERE caller_did = NEW.caller_did AND operation_id = NEW.operation_id;
			` + flowAccountOf + `
		END`,
}
