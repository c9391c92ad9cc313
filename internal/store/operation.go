package store

import (
	"math/bits"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DueAt is an attempted operation's effective due time: its next attempt
// time, or for a row recorded without one (another implementation's, or an
// adopted table's) the time it was recorded. Migration 0012's partial index
// is over exactly this expression, for attempted rows only.
const DueAt = "COALESCE(next_attempt_at, created_at)"

// DueBy is an attempted operation due at or before now (epoch ms): one
// range of the claim index. The state is a literal, not a parameter, so both
// databases can prove the partial index's predicate from the query.
func DueBy(now int64) clause.Expr {
	return clause.Expr{SQL: PlainAttempted + " AND " + DueAt + " <= ?", Vars: []any{now}}
}

// PlainAttempted and FlowAttempted are the predicates of the two claim
// indexes (migration 0020): attempted rows of accounts under no flow
// control, claimed oldest first across the journal, and those of accounts
// under flow control, claimed account by account. Written as literals, as
// the indexes have them, so both databases prove the index's predicate
// from the query.
const (
	PlainAttempted = "state = '" + models.OperationAttempted + "' AND NOT flow"
	FlowAttempted  = "state = '" + models.OperationAttempted + "' AND flow"
)

// ClaimBucket is how many rows at most the inner query of a claim of n
// picks: the smallest power of two at least n. That limit is written into
// the statement's text (dialect.FixedLimit), so that a generic plan knows
// it; a power of two keeps the texts a statement cache holds to a few
// dozen whatever limits a worker pool asks for, and FirstDue's LIMIT n, a
// parameter, takes exactly n of them.
func ClaimBucket(n int) int {
	if n <= 1 || n > 1<<30 {
		return max(n, 1)
	}
	return 1 << bits.Len(uint(n-1))
}

// FirstDue is the keys of the first n rows picked returns: picked selects
// caller_did and operation_id in due order, limited to ClaimBucket(n) rows,
// and locks each row as it returns it, so the outer LIMIT, which stops
// pulling at n, leaves the rest of its limit unlocked and unclaimed. The
// outer query has no ORDER BY of its own: both databases stream a
// subquery's rows in its order (a Subquery Scan, a co-routine), and an
// ORDER BY there made PostgreSQL sort, so pull and lock, every picked row.
func FirstDue(db, picked *gorm.DB, n int, cols ...string) *gorm.DB {
	return db.Table("(?) AS "+firstDueAlias, picked).Select(cols).Limit(n)
}

// The names the claim statement introduces carry the store's table prefix:
// a repository's scopes are written into the same statement, and may read
// the application's own tables, whose names must not resolve to ours (a
// scope reading a table named picked met the CTE instead: a missing column
// on PostgreSQL, a circular reference on SQLite).
const (
	firstDueAlias = "kubun_connector_due"
	pickedCTE     = "kubun_connector_picked"
)

// PickedUpdate is the UPDATE clause of a statement that changes the rows
// pick selects (caller_did and operation_id, locking them): WITH
// kubun_connector_picked AS MATERIALIZED (pick) UPDATE
// kubun_connector_operation, the statement's condition being InPicked. A
// materialized CTE runs once. As a subquery of
// the UPDATE's condition the pick could run again for every row the
// UPDATE's other conditions found (PostgreSQL put it, without a
// Materialize, inside a nested loop driven by the owner index when a
// repository's scope named an owner), and each run locked and returned
// rows the runs before had not: a claim of 3 leased 4 rows, or every due
// row of the owner (TestScopedClaimLeasesAtMostItsLimit).
func PickedUpdate(pick any) clause.Interface { return pickedUpdate{pick: pick} }

// InPicked is an operation among the rows PickedUpdate's pick selected.
var InPicked = clause.Expr{SQL: "(caller_did, operation_id) IN (SELECT caller_did, operation_id FROM " + pickedCTE + ")"}

type pickedUpdate struct{ pick any }

// Name makes it the statement's UPDATE clause.
func (pickedUpdate) Name() string { return "UPDATE" }

// Build writes the CTE, then UPDATE and the statement's table.
func (u pickedUpdate) Build(b clause.Builder) {
	b.WriteString("WITH " + pickedCTE + " AS MATERIALIZED (")
	b.AddVar(b, u.pick)
	b.WriteString(") UPDATE ")
	b.WriteQuoted(clause.Table{Name: clause.CurrentTable})
}

// MergeClause makes u the statement's UPDATE clause.
func (u pickedUpdate) MergeClause(c *clause.Clause) {
	c.Name = ""
	c.Expression = u
}

// StillHeld is a row still attempted with an unexpired lease at now (a
// value or an expression), for a batched write whose fence join checks the
// token. Written so no index can serve it (state || ”, lease_expires_at +
// 0): SQLite would otherwise drive the join from the operation table
// through the state index, every live lease joined to a scan of the batch's
// rows. Left with the primary key as the only way in, both databases drive
// from the batch's rows and find each operation by its key.
func StillHeld(now any) clause.Expr {
	return clause.Expr{SQL: "state || '' = ? AND lease_expires_at + 0 >= ?", Vars: []any{models.OperationAttempted, now}}
}

// KeyInRows is an operation whose key is among the rows of from (a JSON
// row source with columns v_caller_did and v_operation_id, aliased v) with
// its values.
func KeyInRows(from string, vars []any) clause.Expr {
	return clause.Expr{SQL: "(caller_did, operation_id) IN (SELECT v.v_caller_did, v.v_operation_id FROM " + from + ")", Vars: vars}
}

// DueAtMost is an operation due at or before at (epoch ms), for a page of
// the overdue listing: the claim index's range.
func DueAtMost(at int64) clause.Expr {
	return clause.Expr{SQL: DueAt + " <= ?", Vars: []any{at}}
}

// DueOrder is the overdue listing's order: due time, then key.
const DueOrder = DueAt + ", caller_did, operation_id"

// DueAfter is an operation after (due, caller, operation id) in DueOrder.
// The bound on the due time alone is what the claim index serves; the row
// comparison settles ties.
func DueAfter(due int64, caller, operation string) clause.Expr {
	return clause.Expr{SQL: DueAt + " >= ? AND (" + DueAt + ", caller_did, operation_id) > (?, ?, ?)",
		Vars: []any{due, due, caller, operation}}
}

// QueueCounts is the select list of the queue's counts per connector, owner
// and state at now (epoch ms), with the lease clock's lnow (a value or an
// expression) and the overdue bound overdueAt: total rows, due ones (ready:
// attempted, due, lease free), leased ones (a live lease), overdue ones, and
// the oldest due time among the ready.
func QueueCounts(now int64, lnow any, overdueAt int64) (string, []any) {
	ready := "state = '" + models.OperationAttempted + "' AND " + DueAt + " <= ? AND (lease_token IS NULL OR lease_expires_at < ?)"
	live := "state = '" + models.OperationAttempted + "' AND lease_token IS NOT NULL AND lease_expires_at >= ?"
	return "connector_name, owner_did, state, COUNT(*) AS total, " +
			"SUM(CASE WHEN " + ready + " THEN 1 ELSE 0 END) AS due, " +
			"SUM(CASE WHEN " + live + " THEN 1 ELSE 0 END) AS leased, " +
			"SUM(CASE WHEN " + ready + " AND " + DueAt + " <= ? THEN 1 ELSE 0 END) AS overdue, " +
			"MIN(CASE WHEN " + ready + " THEN " + DueAt + " END) AS oldest_due_at",
		[]any{now, lnow, lnow, now, lnow, overdueAt, now, lnow}
}

// SeqOf reads the seq of the operation (caller, id), unscoped: none when no
// row has that key.
func SeqOf(db *gorm.DB, caller, id string) ([]int64, error) {
	var found []int64
	err := db.Model(&models.Operation{}).Where("caller_did = ? AND operation_id = ?", caller, id).Limit(1).Pluck("seq", &found).Error
	return found, err
}
