package fence

import (
	"maps"
	"reflect"
	"slices"

	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"gorm.io/gorm/clause"
)

// Plan is writes as one UPDATE joined to their rows: the per-row values
// travel as a few parameters (jsonrows) that the FROM clause reads back as
// a table v, matched to the operations by primary key and token (a plan of one
// binds its values directly: jsonrows' fast case). The statement text
// depends on the writes' shape (which columns vary, one row or many), never
// on their number, so PostgreSQL prepares and plans it once per shape; and
// each row is found by an index probe, where an OR of every fence with a
// CASE per column cost O(rows²).
type Plan struct {
	// From is the FROM clause naming the rows as v.
	From clause.Interface
	// Set is the UPDATE's assignments.
	Set map[string]any
	// Where joins v to the operations and applies the guards.
	Where []clause.Expression
}

// PlanOf builds the join for ws, stamped and validated. A column every
// write sets to one value is set plainly; a column set to different values
// reads v.v_<col>, behind a per-row flag s_<col> where some writes leave it
// alone; a guard col is g_<col>, NULL for a row without that guard. A text
// value in the rows that is not valid UTF-8 is jsonrows.ErrInvalidUTF8; the
// caller validates every value before planning (a value set plainly is a
// bound parameter).
func PlanOf(dialect string, ws []Write) (Plan, error) {
	cols := []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id"), jsonrows.Text("v_lease_token")}
	rows := make([][]any, len(ws))
	for i, w := range ws {
		rows[i] = []any{w.Target.CallerDID, w.Target.OperationID, w.Target.LeaseToken}
	}
	p := Plan{Set: map[string]any{}, Where: []clause.Expression{store.FenceJoin}}
	for _, col := range setColumns(ws) {
		if v, same := sameValue(ws, col); same {
			p.Set[col] = v
			continue
		}
		all := true
		for i, w := range ws {
			v, ok := w.Set[col]
			all = all && ok
			rows[i] = append(rows[i], v)
		}
		cols = append(cols, jsonrows.Typed("v_"+col))
		p.Set[col] = store.RowValue(col)
		if !all {
			for i, w := range ws {
				_, ok := w.Set[col]
				rows[i] = append(rows[i], ok)
			}
			cols = append(cols, jsonrows.Col{Name: "s_" + col, Type: "boolean"})
			p.Set[col] = store.RowValueIf(col)
		}
	}
	for _, g := range guardColumns(ws) {
		for i, w := range ws {
			rows[i] = append(rows[i], guardValue(w, g.Col))
		}
		cols = append(cols, jsonrows.Typed("g_"+g.Col))
		p.Where = append(p.Where, store.RowGuard(g.Col, g.OrNull))
	}
	sql, vars, err := jsonrows.Table(dialect, "v", cols, rows)
	if err != nil {
		return Plan{}, err
	}
	p.From = fromRows{sql: sql, vars: vars}
	return p, nil
}

// setColumns is every column some write sets, in a stable order.
func setColumns(ws []Write) []string {
	seen := map[string]bool{}
	for _, w := range ws {
		for col := range w.Set {
			seen[col] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// guardColumns is one guard per guarded column, in a stable order.
func guardColumns(ws []Write) []Guard {
	seen := map[string]Guard{}
	for _, w := range ws {
		for _, g := range w.Guards {
			seen[g.Col] = g
		}
	}
	out := make([]Guard, 0, len(seen))
	for _, col := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, seen[col])
	}
	return out
}

func guardValue(w Write, col string) any {
	for _, g := range w.Guards {
		if g.Col == col {
			return g.Value
		}
	}
	return nil
}

// sameValue reports whether every write sets col, to one value.
func sameValue(ws []Write, col string) (any, bool) {
	first, ok := ws[0].Set[col]
	if !ok {
		return nil, false
	}
	for _, w := range ws[1:] {
		if v, ok := w.Set[col]; !ok || !reflect.DeepEqual(v, first) {
			return nil, false
		}
	}
	return first, true
}

// fromRows is the FROM clause of a planned UPDATE.
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
