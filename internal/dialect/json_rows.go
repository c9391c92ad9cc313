package dialect

import "strings"

// RowSource is how a database reads many rows, bound as a few values, back
// as a table: the statement's text does not depend on the number of rows,
// and neither a bound-parameter limit nor the parser's depth caps a batch.
//
// PostgreSQL takes one JSON array per column, zipped back into rows by
// ROWS FROM (json_array_elements_text, …) and cast to the columns' types:
// elements have no keys to look up, which costs the server about a tenth
// less per row than json_to_recordset's objects (a relist's candidates and
// every batched write are such statements). It is JSON rather than an
// array literal, which parses as fast, because a literal's NULL is a null
// only while the server's array_nulls is on; with it off (a role's or a
// database's setting) NULL became the text "NULL", or failed a bigint.
// SQLite takes one JSON array of objects, read back by json_each.
type RowSource struct{ postgres bool }

// Rows is the row source of the database named name (Dialect.Name).
func Rows(name string) RowSource { return RowSource{postgres: name == "postgres"} }

// Columnar reports whether the rows are bound one JSON array per column,
// in the order of the columns, then their count; otherwise they are bound
// as one JSON array of objects keyed by column, then their count.
func (s RowSource) Columnar() bool { return s.postgres }

// SQL reads the bound rows back as a table named alias with the columns
// names of SQL types types. The row count, bound last, bounds the table
// (LIMIT n, which changes nothing): the planner otherwise guesses 100 rows
// and plans a batch's lookups for that.
func (s RowSource) SQL(alias string, names, types []string) string {
	var b strings.Builder
	b.WriteString("(SELECT ")
	if s.postgres {
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("CAST(r." + n + " AS " + types[i] + ") AS " + n)
		}
		b.WriteString(" FROM ROWS FROM (")
		for i := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			// CAST(? AS TEXT) first: every driver binds a Go string as text.
			b.WriteString("json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON))")
		}
		b.WriteString(") AS r(" + strings.Join(names, ", ") + ") LIMIT CAST(? AS BIGINT)) AS " + alias)
		return b.String()
	}
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("json_extract(value, '$." + n + "') AS " + n)
	}
	b.WriteString(" FROM json_each(?) LIMIT ?) AS " + alias)
	return b.String()
}
