package migrations

import (
	"strconv"

	"github.com/connstore/connstore/models"
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// attemptTable is the operations' attempt history.
const attemptTable = "kubun_connector_operation_attempt"

// answerChanged is, for a row OLD that becomes NEW in a statement that sets
// last_answer_at, whether the statement gave it a new answer. Every
// statement of the repository's that names the column answers each of its
// rows (a batch of snoozes puts its pauses in a statement of their own),
// and each answer either ends a lease, whose token is new
// (ended_lease_token), or changes the state (a cancel): so two answers in
// one millisecond are two rows. The other terms keep an application's own
// write of the same values (gorm's Save of a row as read) from adding one.
const answerChanged = `NEW.last_answer_at IS NOT NULL AND (NEW.last_answer_at IS DISTINCT FROM OLD.last_answer_at
	OR NEW.ended_lease_token IS DISTINCT FROM OLD.ended_lease_token
	OR NEW.attempts IS DISTINCT FROM OLD.attempts OR NEW.state IS DISTINCT FROM OLD.state)`

// keepNewest deletes the answers of NEW's operation older than the newest
// models.AttemptHistoryLimit.
var keepNewest = `DELETE FROM ` + attemptTable + ` WHERE caller_did = NEW.caller_did AND operation_id = NEW.operation_id
	AND id <= (SELECT id FROM ` + attemptTable + ` WHERE caller_did = NEW.caller_did AND operation_id = NEW.operation_id
		ORDER BY id DESC LIMIT 1 OFFSET ` + strconv.Itoa(models.AttemptHistoryLimit) + `)`

const insertAnswer = `INSERT INTO ` + attemptTable + ` (caller_did, operation_id, answered_at, attempts, state, kind, http_status, message)
	VALUES (NEW.caller_did, NEW.operation_id, NEW.last_answer_at, NEW.attempts, NEW.state, NEW.last_kind,
		NEW.last_http_status, NEW.last_message)`

// attemptsMigration gives each operation a bounded history of its answers
// (models.OperationAttempt) and the journal the last answer's message and
// time. Before it the journal kept only the last kind and status, and a
// requeued operation that then died showed the cause of the death before.
//
// The history is written by a row trigger on UPDATE OF last_answer_at,
// which only a write that records an answer names (a failure, a pause, an
// end as dead or reconcile-only, a cancel): PostgreSQL and SQLite fire
// such a trigger only for statements that set the column, so a claim, a
// heartbeat and a commit, the hot path, never call it; and the one
// mechanism serves the single and the batched writes, in their own
// statement's transaction. The history leaves with its operation: on
// PostgreSQL a statement trigger on DELETE (one join of the deleted rows,
// as retention's queue does), on SQLite a row trigger. The new columns are
// NULL on every existing row (a catalog change, no rewrite).
func attemptsMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0023_operation_attempts",
		Migrate: func(tx *gorm.DB) error {
			columns := []string{
				`ALTER TABLE kubun_connector_operation ADD COLUMN last_message TEXT`,
				`ALTER TABLE kubun_connector_operation ADD COLUMN last_answer_at BIGINT`,
			}
			if tx.Dialector.Name() != "postgres" {
				return execAll(tx, append(columns,
					`CREATE TABLE IF NOT EXISTS `+attemptTable+` (id INTEGER PRIMARY KEY AUTOINCREMENT,
						caller_did TEXT NOT NULL, operation_id TEXT NOT NULL, answered_at BIGINT NOT NULL,
						attempts BIGINT NOT NULL, state TEXT NOT NULL, kind TEXT, http_status BIGINT, message TEXT)`,
					`CREATE INDEX IF NOT EXISTS `+attemptTable+`_op_idx ON `+attemptTable+` (caller_did, operation_id, id)`,
					`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_attempt_upd
						AFTER UPDATE OF last_answer_at ON kubun_connector_operation
						FOR EACH ROW WHEN `+answerChanged+`
						BEGIN `+insertAnswer+`; `+keepNewest+`; END`,
					`CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_attempt_del
						AFTER DELETE ON kubun_connector_operation FOR EACH ROW
						BEGIN DELETE FROM `+attemptTable+` WHERE caller_did = OLD.caller_did
							AND operation_id = OLD.operation_id; END`,
				))
			}
			return execAll(tx, append(columns,
				`CREATE TABLE IF NOT EXISTS `+attemptTable+` (id BIGSERIAL PRIMARY KEY,
					caller_did TEXT COLLATE "C" NOT NULL, operation_id TEXT COLLATE "C" NOT NULL, answered_at BIGINT NOT NULL,
					attempts BIGINT NOT NULL, state TEXT NOT NULL, kind TEXT, http_status BIGINT, message TEXT)`,
				`CREATE INDEX IF NOT EXISTS `+attemptTable+`_op_idx ON `+attemptTable+` (caller_did, operation_id, id)`,
				`CREATE OR REPLACE FUNCTION kubun_connector_operation_attempt() RETURNS trigger
					LANGUAGE plpgsql AS $$
					BEGIN
						`+insertAnswer+`;
						`+keepNewest+`;
						RETURN NULL;
					END $$`,
				`CREATE OR REPLACE FUNCTION kubun_connector_operation_attempt_gone() RETURNS trigger
					LANGUAGE plpgsql AS $$
					BEGIN
						DELETE FROM `+attemptTable+` a USING attempt_old o
						WHERE a.caller_did = o.caller_did AND a.operation_id = o.operation_id;
						RETURN NULL;
					END $$`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_upd ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_attempt_upd AFTER UPDATE OF last_answer_at ON kubun_connector_operation
					FOR EACH ROW WHEN (`+answerChanged+`) EXECUTE FUNCTION kubun_connector_operation_attempt()`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_del ON kubun_connector_operation`,
				`CREATE TRIGGER kubun_connector_operation_attempt_del AFTER DELETE ON kubun_connector_operation
					REFERENCING OLD TABLE AS attempt_old
					FOR EACH STATEMENT EXECUTE FUNCTION kubun_connector_operation_attempt_gone()`,
			))
		},
		Rollback: func(tx *gorm.DB) error {
			stmts := []string{
				`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_upd`,
				`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_del`,
			}
			if tx.Dialector.Name() == "postgres" {
				stmts = []string{
					`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_upd ON kubun_connector_operation`,
					`DROP TRIGGER IF EXISTS kubun_connector_operation_attempt_del ON kubun_connector_operation`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_attempt()`,
					`DROP FUNCTION IF EXISTS kubun_connector_operation_attempt_gone()`,
				}
			}
			return execAll(tx, append(stmts, `DROP TABLE IF EXISTS `+attemptTable,
				`ALTER TABLE kubun_connector_operation DROP COLUMN last_message`,
				`ALTER TABLE kubun_connector_operation DROP COLUMN last_answer_at`))
		},
	}
}
