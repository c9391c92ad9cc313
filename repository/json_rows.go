package repository

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonTable is rows as a table v for a FROM clause: the SQL that reads it,
// and the values it binds (the rows as one JSON value, and their count).
// Many rows travel as one parameter, so the statement's text does not
// depend on how many there are and no bound-parameter limit or parser depth
// caps a batch. The count bounds the table (LIMIT n, which changes nothing):
// the planner otherwise guesses 100 rows for a JSON row set and prefers
// scanning a table of a few thousand rows to finding a 16-row batch by key.
// A column with no type is typed from its values.
func jsonTable(dialect string, cols []batchCol, rows [][]any) (sql string, vars []any, err error) {
	return jsonTableAs(dialect, "v", cols, rows)
}

// jsonTableAs is jsonTable under another alias.
func jsonTableAs(dialect, alias string, cols []batchCol, rows [][]any) (sql string, vars []any, err error) {
	doc, err := encodeRows(cols, rows)
	if err != nil {
		return "", nil, err
	}
	return fromSQL(dialect, alias, cols), []any{doc, int64(len(rows))}, nil
}

// batchCol is one column of v: its name in v and in the JSON rows, and its
// SQL type (PostgreSQL needs one to read JSON back as a table).
type batchCol struct{ name, typ string }

// fromSQL reads the JSON rows back as the table alias; PostgreSQL needs
// the column types, SQLite takes the JSON values as they are.
func fromSQL(dialect, alias string, cols []batchCol) string {
	var b strings.Builder
	if dialect == "postgres" {
		b.WriteString("(SELECT * FROM json_to_recordset(CAST(CAST(? AS TEXT) AS JSON)) AS r(")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.name + " " + c.typ)
		}
		b.WriteString(") LIMIT CAST(? AS BIGINT)) AS " + alias)
		return b.String()
	}
	b.WriteString("(SELECT ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("json_extract(value, '$." + c.name + "') AS " + c.name)
	}
	b.WriteString(" FROM json_each(?) LIMIT ?) AS " + alias)
	return b.String()
}

// encodeRows writes the rows as a JSON array of objects keyed by column,
// typing every column left untyped from its values.
func encodeRows(cols []batchCol, rows [][]any) (string, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, row := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j, v := range row {
			typ, err := appendJSON(&b, cols[j].name, v)
			if err != nil {
				return "", fmt.Errorf("batch row %d: %w", i, err)
			}
			if cols[j].typ == "" {
				cols[j].typ = typ
			}
			if j < len(row)-1 {
				b.WriteByte(',')
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	for j := range cols {
		if cols[j].typ == "" {
			cols[j].typ = "text" // every row NULL
		}
	}
	return b.String(), nil
}

// appendJSON writes "key":value and returns the value's SQL type ("" for
// NULL). Pointers are followed and driver.Valuers asked for their value, as
// the database driver would.
func appendJSON(b *bytes.Buffer, key string, v any) (string, error) {
	b.WriteString(`"` + key + `":`)
	if dv, ok := v.(driver.Valuer); ok {
		var err error
		if v, err = dv.Value(); err != nil {
			return "", err
		}
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			v = nil
		} else {
			v = rv.Elem().Interface()
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return "", nil
	case string:
		if !utf8.ValidString(x) {
			return "", invalid("%s is not valid UTF-8", strings.TrimPrefix(key, "v_"))
		}
		enc, _ := json.Marshal(x)
		b.Write(enc)
		return "text", nil
	case bool:
		b.WriteString(strconv.FormatBool(x))
		return "boolean", nil
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
		return "bigint", nil
	case int:
		b.WriteString(strconv.Itoa(x))
		return "bigint", nil
	}
	return "", fmt.Errorf("batch value of type %T for %s", v, key)
}
