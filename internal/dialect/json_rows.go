package dialect

import "strings"

// RowSource is how a database reads many rows, bound as a few values, back
// as a table: the statement's text does not depend on the number of rows,
// and neither a bound-parameter limit nor the parser's depth caps a batch.
//
// PostgreSQL takes one array literal per column, read back by unnest: an
// array's elements are parsed by the column type's input function, with no
// keys to look up, which costs the server about a tenth less per row than
// json_to_recordset's objects (a relist's candidates and every batched
// write are such statements). SQLite has no arrays: it takes one JSON array
// of objects, read back by json_each.
type RowSource struct{ postgres bool }

// Rows is the row source of the database named name (Dialect.Name).
func Rows(name string) RowSource { return RowSource{postgres: name == "postgres"} }

// Columnar reports whether the rows are bound one array literal per column,
// in the order of the columns, then their count; otherwise they are bound
// as one JSON array of objects keyed by column, then their count.
func (s RowSource) Columnar() bool { return s.postgres }

// SQL reads the bound rows back as a table named alias with the columns
// names of SQL types types. The row count, bound last, bounds the table
// (LIMIT n, which changes nothing): the planner otherwise guesses 100 rows
// (JSON) or 10 (unnest of a parameter) and plans a batch's lookups for that.
func (s RowSource) SQL(alias string, names, types []string) string {
	var b strings.Builder
	if s.postgres {
		b.WriteString("(SELECT * FROM unnest(")
		for i, t := range types {
			if i > 0 {
				b.WriteString(", ")
			}
			// The inner cast makes the parameter text, which every driver
			// binds from a Go string; the outer one parses the literal.
			b.WriteString("CAST(CAST(? AS TEXT) AS " + t + "[])")
		}
		b.WriteString(") AS r(" + strings.Join(names, ", ") + ") LIMIT CAST(? AS BIGINT)) AS " + alias)
		return b.String()
	}
	b.WriteString("(SELECT ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("json_extract(value, '$." + n + "') AS " + n)
	}
	b.WriteString(" FROM json_each(?) LIMIT ?) AS " + alias)
	return b.String()
}
