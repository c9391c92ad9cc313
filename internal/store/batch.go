package store

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The batched write's join: its rows travel as one JSON row source aliased
// v (see the repository's planBatch), v_<col> the value a row sets, s_<col>
// whether it sets col at all, g_<col> its guard on col.

// FenceJoin matches each operation to its row of the batch by key and lease
// token.
var FenceJoin = clause.Expr{SQL: "caller_did = v.v_caller_did AND operation_id = v.v_operation_id AND lease_token = v.v_lease_token"}

// RowValue is the value the batch's row sets col to.
func RowValue(col string) clause.Expr { return gorm.Expr("v.v_" + col) }

// RowValueIf is the value the batch's row sets col to where it sets col,
// and col's own value elsewhere.
func RowValueIf(col string) clause.Expr {
	return gorm.Expr("CASE WHEN v.s_"+col+" THEN v.v_"+col+" ELSE ? END", clause.Column{Name: col})
}

// RowGuard is the batch's row's guard on col: none where g_<col> is NULL,
// else col must equal it (or, with orNull, may also still be NULL).
func RowGuard(col string, orNull bool) clause.Expr {
	stored := col + " = v.g_" + col
	if orNull {
		stored = col + " IS NULL OR " + stored
	}
	return clause.Expr{SQL: "(v.g_" + col + " IS NULL OR " + stored + ")"}
}

// Increment is column + 1; table qualifies it where a bare column would be
// ambiguous (ON CONFLICT DO UPDATE on PostgreSQL).
func Increment(table, column string) clause.Expr {
	return gorm.Expr("? + 1", clause.Column{Table: table, Name: column})
}

// Plus is a + b, for values that may be expressions (a lease expiry on the
// database's clock).
func Plus(a, b any) clause.Expr { return clause.Expr{SQL: "(? + ?)", Vars: []any{a, b}} }
