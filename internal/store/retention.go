package store

import (
	"fmt"
	"strings"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The retention pass's SQL (internal/retention runs it): which rows a pass
// judges, the seed's keep rules over a window of them, the delete's
// re-check, and the queue of documents on which a row finished.

// newerExists is "a newer operation of states on the same document with the
// same column (caller or owner) as o", newer by (created_at, caller_did,
// operation_id). The state is compared as an expression (concatenated with
// an empty string) so no index on state can serve the probe: a planner
// without statistics chose one and read every committed row per probe, a
// million rows for each of the window's; the document indexes are the
// probe's only way in.
func newerExists(column, states string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM kubun_connector_operation n
		WHERE n.document_id = o.document_id AND n.%[1]s = o.%[1]s AND n.state || '' IN (%[2]s)
		AND (n.created_at > o.created_at
			OR (n.created_at = o.created_at AND n.caller_did > o.caller_did)
			OR (n.created_at = o.created_at AND n.caller_did = o.caller_did AND n.operation_id > o.operation_id)))`,
		column, states)
}

// superseded is the seed's keep rule for a row on a document: a row is
// collected only while newer rows of its kind exist on the same document.
// The seed's rule is four conditions on every row: not the newest commit of
// its caller, nor of its owner (for a commit: the latest commit bounds which
// older rows still count), and not the newest finished row of its caller,
// nor of its owner (the newest one decides whether the document shows a
// failure). A newer commit is a newer finished row, so for a commit the
// first two imply the last two, and for a dead row the first two hold by
// themselves: each row needs only the two probes of its state's branch.
var superseded = `CASE WHEN o.state = ` + sqlStrings(models.OperationCommitted) + `
	THEN ` + newerExists("caller_did", sqlStrings(models.OperationCommitted)) + `
		AND ` + newerExists("owner_did", sqlStrings(models.OperationCommitted)) + `
	ELSE ` + newerExists("caller_did", finishedStates) + `
		AND ` + newerExists("owner_did", finishedStates) + `
	END`

// finishedStates lists the states retention collects, as SQL.
var finishedStates = sqlStrings(models.OperationCommitted, models.OperationDead)

// sqlStrings renders constants as a list of SQL string literals: the
// predicates name states from the models constants, never as retyped text.
// The values are the package's own constants, never input.
func sqlStrings(values ...string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return strings.Join(quoted, ", ")
}

// Judged is the rows a pass judges: unheld finished rows written before
// the cutoff with no live lease. Its first two terms are the predicate of
// the partial index kubun_connector_operation_collect_idx, written as the
// index writes them so both databases read the index in pass order.
var Judged = `retention_hold IS NULL AND state IN (` + finishedStates + `) AND updated_at < @before
	AND (lease_token IS NULL OR lease_expires_at < @now)`

// JudgedColumns are the columns the keep rules read from a judged row.
const JudgedColumns = "caller_did, operation_id, owner_did, document_id, state, created_at, updated_at"

// KeptInWindow picks, among a window of judged rows o, those the keep
// rules keep now: linked to a document and not superseded on it.
var KeptInWindow = `o.document_id IS NOT NULL AND NOT (` + superseded + `)`

// CollectableInWindow picks, among a window of judged rows o, those the
// keep rules collect: linked to no document, or superseded on it.
var CollectableInWindow = `o.document_id IS NULL OR (` + superseded + `)`

// Recheck is the DELETE's re-check on the row being deleted: a row
// leased or written between the candidate read and the delete (Postgres,
// READ COMMITTED) is kept, and whatever picked it, a row that is not an
// unheld finished row is never deleted. Those two terms are written so no
// index matches them (a planner that took the judged-rows index for them
// read the whole journal instead of the picked rows by id).
var Recheck = `updated_at < @before AND (lease_token IS NULL OR lease_expires_at < @now)
	AND COALESCE(retention_hold, 0) = 0 AND state || '' IN (` + finishedStates + `)`

// CollectOrder is the order passes judge rows in: the judged-rows index's.
const CollectOrder = "updated_at, caller_did, operation_id"

// Window names a pass's window of judged rows (a subquery) as o; WindowOrder
// is CollectOrder on it.
const (
	Window      = "(?) AS o"
	WindowOrder = "o.updated_at, o.caller_did, o.operation_id"
)

// consumeFinished takes up to ? entries off the queue of documents on
// which a row finished, oldest first, and returns their document ids.
const consumeFinished = `DELETE FROM kubun_connector_retention_finished WHERE seq IN
	(SELECT seq FROM kubun_connector_retention_finished ORDER BY seq LIMIT ?) RETURNING document_id`

// ConsumeFinished takes up to limit entries off the queue of documents on
// which a row finished, oldest first, through db, and returns their
// document ids (repeats included).
func ConsumeFinished(db *gorm.DB, limit int) ([]string, error) {
	var docs []string
	err := db.Raw(consumeFinished, limit).Scan(&docs).Error
	return docs, err
}

// HeldOn is the held rows of the documents docs.
func HeldOn(docs []string) clause.Expr {
	return clause.Expr{SQL: "retention_hold IS NOT NULL AND document_id IN ?", Vars: []any{docs}}
}
