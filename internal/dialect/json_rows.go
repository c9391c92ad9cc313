package dialect

import "strings"

// JSONRows is the SQL that reads a JSON array of objects, bound as its first
// parameter (with the row count, which bounds the table, as its second),
// back as a table named alias with the columns names of SQL types types, on
// the database named name (Dialect.Name): PostgreSQL's json_to_recordset
// needs the types, SQLite's json_each takes the JSON values as they are.
func JSONRows(name, alias string, names, types []string) string {
	var b strings.Builder
	if name == "postgres" {
		b.WriteString("(SELECT * FROM json_to_recordset(CAST(CAST(? AS TEXT) AS JSON)) AS r(")
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n + " " + types[i])
		}
		b.WriteString(") LIMIT CAST(? AS BIGINT)) AS " + alias)
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
