package store

import (
	"fmt"
	"strings"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
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
// probe's only way in. The bound on created_at alone is what those indexes
// serve (the OR that settles ties is no index bound): without it each probe
// read its document's rows of that caller or owner from the oldest one, and
// a pass over a long document read millions of rows.
func newerExists(column, states string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM kubun_connector_operation n
		WHERE n.document_id = o.document_id AND n.%[1]s = o.%[1]s AND n.state || '' IN (%[2]s)
		AND n.created_at >= o.created_at
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

// PendingTable is the table of finished rows a pass has still to judge
// (models.RetentionPending): triggers keep it equal to the finished rows
// not held.
const PendingTable = "kubun_connector_retention_pending"

// EntryColumns are the columns a pass reads from its entries.
const EntryColumns = "ord, updated_at, caller_did, operation_id, owner_did, connector_name"

// EntryKey is an entry's key: the pending table's primary key, in pass
// order (its place, then the operation's key).
const EntryKey = "ord, caller_did, operation_id"

// Waiting is the entries a pass may judge: placed before the cutoff. An
// entry's place is never before its row's updated_at, so each is a row
// last written before the cutoff (the join re-checks the row).
const Waiting = "ord < @before"

// entryRow joins a window of entries (e) to their journal rows (j): the
// row as the entry recorded it, still finished. Triggers keep the two
// equal; matching on every column an entry holds means a scoped pass can
// only ever act on a row its scopes admit, whatever the entry says. The
// state and the owner are compared as expressions, so the join's only way
// in is the journal's primary key: without statistics a planner read every
// finished row through the index led by state (evaluating the keep rules
// on each), or every row of the owner through the owner index, per entry.
var entryRow = `j.caller_did = e.caller_did AND j.operation_id = e.operation_id AND j.updated_at = e.updated_at
	AND j.owner_did || '' = e.owner_did AND j.connector_name = e.connector_name
	AND j.state || '' IN (` + finishedStates + `)`

// Unleased is a journal row j without a live lease at @now. It is NULL for
// a token with no expiry, which no condition below takes for true.
const Unleased = "(j.lease_token IS NULL OR j.lease_expires_at < @now)"

// JudgedRows is, as a FROM clause over a window of entries (the subquery
// its one value is, selecting EntryColumns), their journal rows as the
// entries recorded them, still finished; with Unleased, the rows a pass
// judges. Its select list is JudgedColumns, from j.
func JudgedRows() string {
	return "(?) AS e JOIN kubun_connector_operation j ON " + entryRow
}

// JudgedColumns are the columns the keep rules read from a judged row.
const JudgedColumns = "e.ord, j.caller_did, j.operation_id, j.owner_did, j.document_id, j.state, j.created_at, j.updated_at, j.connector_name"

// EntryRows is, as a FROM clause over a window of entries (the subquery its
// one value is), each entry with its journal row where it has one. Its
// select list is EntryRowColumns.
func EntryRows() string {
	return "(?) AS e LEFT JOIN kubun_connector_operation j ON " + entryRow
}

// EntryRowColumns are EntryRows' columns: the key from the entry, the state
// from the row (NULL without one), and whether the row is held as it
// stands (1): a held entry recording every column the keep rules and the
// scopes judged it by, its state included. (One that recorded an older owner, say, is a hold
// of another version: a writer changed the row while the pass held it, and
// its entry among the rows to judge must stay.) The held entry is a probe
// per row, not a join: joined, a planner could join every journal row to
// its held entry first and match the window against that, reading the
// whole journal.
const EntryRowColumns = "e.ord, e.caller_did, e.operation_id, j.state, " +
	"CASE WHEN EXISTS (SELECT 1 FROM " + HeldTable + " h WHERE h.document_id = j.document_id " +
	"AND h.caller_did = j.caller_did AND h.operation_id = j.operation_id AND h.updated_at = j.updated_at " +
	"AND h.owner_did = j.owner_did AND h.connector_name = j.connector_name AND h.state = j.state) THEN 1 ELSE 0 END AS held"

// KeptInWindow picks, among a window of judged rows o, those the keep
// rules keep now: linked to a document and not superseded on it.
var KeptInWindow = `o.document_id IS NOT NULL AND NOT (` + superseded + `)`

// CollectableInWindow picks, among a window of judged rows o, those the
// keep rules collect: linked to no document, or superseded on it.
var CollectableInWindow = `o.document_id IS NULL OR (` + superseded + `)`

// Settled picks, among a window of EntryRows o, the entries a pass takes
// out of the table once it has deleted what it collects and held what the
// keep rules keep: those of held rows (their entries moved to the held
// table), and those with no row as the entry recorded it (a trigger removed
// or replaced the entry meanwhile; no row is judged through it). An entry
// stays while its row is under a live lease (judged later) or collectable
// (the limit left it for the next pass).
const Settled = `o.state IS NULL OR o.held = 1`

// Recheck is the DELETE's re-check on the row being deleted: a row
// leased or written between the candidate read and the delete (Postgres,
// READ COMMITTED) is kept, and whatever picked it, a row that is not a
// finished row is never deleted. Those terms are written so no index
// matches them (a planner that took an index for them read the whole
// journal instead of the picked rows by id).
var Recheck = `updated_at < @before AND (lease_token IS NULL OR lease_expires_at < @now)
	AND state || '' IN (` + finishedStates + `)`

// Window names a pass's window (a subquery) as o; WindowOrder is the pass
// order on it.
const (
	Window      = "(?) AS o"
	WindowOrder = "o.ord, o.caller_did, o.operation_id"
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

// HeldTable is the table of held rows by document (models.RetentionHeld).
const HeldTable = "kubun_connector_retention_held"

// HeldColumns are a held entry's columns, in the order Hold inserts them;
// a hold selects them from its window of judged rows o.
const HeldColumns = "document_id, caller_did, operation_id, updated_at, owner_did, connector_name, state"

// hold records the rows its subquery selects (HeldColumns) as held. A row
// held already, at an older version (a hold and a write to the row that
// raced it), takes the new one: the entry is the row as it was kept. The
// WHERE is SQLite's: without it, ON CONFLICT after a SELECT reads as a join.
var hold = `INSERT INTO ` + HeldTable + ` (` + HeldColumns + `) SELECT * FROM (?) AS k WHERE true
	ON CONFLICT (document_id, caller_did, operation_id) DO UPDATE SET updated_at = excluded.updated_at,
		owner_did = excluded.owner_did, connector_name = excluded.connector_name, state = excluded.state`

// Hold records the rows kept selects (HeldColumns, from a window of
// judged rows) as held, through db.
func Hold(db *gorm.DB, kept *gorm.DB) error {
	return db.Exec(hold, kept).Error
}

// release puts the held rows of the documents ? back among the rows to
// judge (a finish on a document may supersede them), placed at ? (or at
// their updated_at, if later); an entry already in that place stays as it
// is. unhold then takes them out of the held rows.
var (
	release = `INSERT INTO ` + PendingTable + ` (` + EntryColumns + `)
		SELECT CASE WHEN updated_at > @at THEN updated_at ELSE @at END, updated_at, caller_did, operation_id,
			owner_did, connector_name
		FROM ` + HeldTable + ` WHERE document_id IN @docs
		ON CONFLICT DO NOTHING`
	unhold = `DELETE FROM ` + HeldTable + ` WHERE document_id IN ?`
)

// Release moves the held rows of the documents docs back among the rows a
// pass judges, through db, reading those rows and nothing else. They take
// their place in the pass order at at (epoch milliseconds; a row written
// later, at its updated_at): behind the rows waiting already. At their old
// place, ahead of those, a release of more rows than a pass's window
// would have every pass judge and hold the same kept rows again and never
// reach the rows behind them.
func Release(db *gorm.DB, docs []string, at int64) error {
	if err := db.Exec(release, map[string]any{"at": at, "docs": docs}).Error; err != nil {
		return err
	}
	return db.Exec(unhold, docs).Error
}
