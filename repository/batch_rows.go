package repository

import (
	"maps"
	"reflect"
	"slices"

	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"gorm.io/gorm/clause"
)

// guard narrows a fenced write beyond its fence: the stored column must
// equal value, or with orNull may also still be NULL.
type guard struct {
	col    string
	value  any
	orNull bool
}

// batchPlan is one batched fenced write as a join: the per-row values travel
// as one JSON parameter that the FROM clause reads back as a table v, matched
// to the operations by primary key and token (a batch of one binds its values
// directly: jsonrows' fast case). The statement text depends on the batch's
// shape (which columns vary, one row or many), never on its size, so
// PostgreSQL prepares and plans it once per shape; and each row is found by
// an index probe, where an OR of every fence with a CASE per column cost
// O(rows²).
type batchPlan struct {
	from  clause.Interface
	set   map[string]any
	where []clause.Expression
}

// planBatch builds the join for ws. A column every write sets to one value
// is set plainly; a column set to different values reads v.v_<col>, behind
// a per-row flag s_<col> where some writes leave it alone; a guard col is
// g_<col>, NULL for a row without that guard.
func planBatch(dialect string, ws []fencedWrite) (batchPlan, error) {
	cols := []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id"), jsonrows.Text("v_lease_token")}
	rows := make([][]any, len(ws))
	for i, w := range ws {
		rows[i] = []any{w.fence.CallerDID, w.fence.OperationID, w.fence.LeaseToken}
	}
	p := batchPlan{set: map[string]any{}, where: []clause.Expression{
		store.FenceJoin,
	}}
	for _, col := range setColumns(ws) {
		if v, same := sameValue(ws, col); same {
			p.set[col] = v
			continue
		}
		all := true
		for i, w := range ws {
			v, ok := w.set[col]
			all = all && ok
			rows[i] = append(rows[i], v)
		}
		cols = append(cols, jsonrows.Typed("v_"+col))
		p.set[col] = store.RowValue(col)
		if !all {
			for i, w := range ws {
				_, ok := w.set[col]
				rows[i] = append(rows[i], ok)
			}
			cols = append(cols, jsonrows.Col{Name: "s_" + col, Type: "boolean"})
			p.set[col] = store.RowValueIf(col)
		}
	}
	for _, g := range guardColumns(ws) {
		for i, w := range ws {
			rows[i] = append(rows[i], guardValue(w, g.col))
		}
		cols = append(cols, jsonrows.Typed("g_"+g.col))
		p.where = append(p.where, store.RowGuard(g.col, g.orNull))
	}
	sql, vars, err := jsonTable(dialect, cols, rows)
	if err != nil {
		return batchPlan{}, err
	}
	p.from = fromRows{sql: sql, vars: vars}
	return p, nil
}

// setColumns is every column some write sets, in a stable order.
func setColumns(ws []fencedWrite) []string {
	seen := map[string]bool{}
	for _, w := range ws {
		for col := range w.set {
			seen[col] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// guardColumns is one guard per guarded column, in a stable order.
func guardColumns(ws []fencedWrite) []guard {
	seen := map[string]guard{}
	for _, w := range ws {
		for _, g := range w.guards {
			seen[g.col] = g
		}
	}
	out := make([]guard, 0, len(seen))
	for _, col := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, seen[col])
	}
	return out
}

func guardValue(w fencedWrite, col string) any {
	for _, g := range w.guards {
		if g.col == col {
			return g.value
		}
	}
	return nil
}

// sameValue reports whether every write sets col, to one value.
func sameValue(ws []fencedWrite, col string) (any, bool) {
	first, ok := ws[0].set[col]
	if !ok {
		return nil, false
	}
	for _, w := range ws[1:] {
		if v, ok := w.set[col]; !ok || !reflect.DeepEqual(v, first) {
			return nil, false
		}
	}
	return first, true
}

// fromRows is the FROM clause of a batched UPDATE.
type fromRows struct {
	sql  string
	vars []any
}

// Name implements clause.Interface.
func (fromRows) Name() string { return "FROM" }

// Build implements clause.Expression.
func (f fromRows) Build(b clause.Builder) { clause.Expr{SQL: f.sql, Vars: f.vars}.Build(b) }

// MergeClause implements clause.Interface.
func (f fromRows) MergeClause(c *clause.Clause) { c.Expression = f }
