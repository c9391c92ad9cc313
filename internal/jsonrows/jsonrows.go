// Package jsonrows carries many rows into one statement as JSON read back
// as a table (one JSON array per column on PostgreSQL, one array of
// objects on SQLite; see dialect.RowSource): the statement's text
// does not depend on the number of rows, and neither a bound-parameter
// limit nor the parser's depth caps a batch. A single row, the common case
// of a single write, is bound value by value instead, with nothing to
// encode or parse.
package jsonrows

import (
	"bytes"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/connstore/connstore/internal/dialect"
)

// ErrInvalidUTF8 is returned for a string value that is not valid UTF-8
// (the databases would refuse or mangle it); the caller reports it as its
// own invalid-input error.
var ErrInvalidUTF8 = errors.New("not valid UTF-8")

// Table is rows as a table named alias for a FROM clause: the SQL that
// reads it, and the values it binds. Many rows travel as a few values (one
// JSON array per column on PostgreSQL, one JSON array of objects on
// SQLite: see dialect.RowSource) and their count, so the statement's text does not
// depend on how many there are and no bound-parameter limit or parser depth
// caps a batch. Columns are typed in place: a column with no type gets its
// values' type.
//
// One row is the fast case: its values are bound one per column, read back
// as a one-row SELECT of typed casts, with nothing to encode and parse
// (a single write is a batch of one; this keeps it as cheap as a plain
// statement). Its text depends on the columns only, as the many-row form's
// does: a statement has one text for a single row and one for many.
func Table(dialectName, alias string, cols []Col, rows [][]any) (sql string, vars []any, err error) {
	if len(rows) == 1 {
		return oneRow(alias, cols, rows[0])
	}
	src := dialect.Rows(dialectName)
	if src.Columnar() {
		vars, err = encodeColumns(cols, rows)
	} else {
		var doc string
		doc, err = encodeRows(cols, rows)
		vars = []any{doc}
	}
	if err != nil {
		return "", nil, err
	}
	names, types := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		names[i], types[i] = c.Name, c.Type
	}
	return src.SQL(alias, names, types), append(vars, int64(len(rows))), nil
}

// oneRow is row as the table alias: (SELECT CAST(? AS type) AS col, …).
// Values are checked and typed as the many-row forms' are (eachValue).
func oneRow(alias string, cols []Col, row []any) (string, []any, error) {
	vars := make([]any, len(row))
	if err := eachValue(cols, [][]any{row}, func(_, j int, v any) { vars[j] = v }); err != nil {
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString("(SELECT ")
	for j, c := range cols {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString("CAST(? AS " + c.Type + ") AS " + c.Name)
	}
	b.WriteString(") AS " + alias)
	return b.String(), vars, nil
}

// Col is one column of the table: its name in the table and in the JSON
// rows, and its SQL type (PostgreSQL reads the JSON back as that type; ""
// types it from the values).
type Col struct{ Name, Type string }

// encodeRows writes the rows as a JSON array of objects keyed by column,
// typing every column left untyped from its values.
func encodeRows(cols []Col, rows [][]any) (string, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	err := eachValue(cols, rows, func(i, j int, v any) {
		switch {
		case j > 0:
			b.WriteByte(',')
		case i > 0:
			b.WriteString(",{")
		default:
			b.WriteByte('{')
		}
		appendJSON(&b, cols[j].Name, v)
		if j == len(cols)-1 {
			b.WriteByte('}')
		}
	})
	if err != nil {
		return "", err
	}
	b.WriteByte(']')
	return b.String(), nil
}

// encodeColumns writes the rows as one JSON array per column, typing
// every column left untyped from its values.
func encodeColumns(cols []Col, rows [][]any) ([]any, error) {
	arrays := make([]bytes.Buffer, len(cols))
	for j := range arrays {
		arrays[j].WriteByte('[')
	}
	err := eachValue(cols, rows, func(i, j int, v any) {
		if i > 0 {
			arrays[j].WriteByte(',')
		}
		appendValue(&arrays[j], v)
	})
	if err != nil {
		return nil, err
	}
	vars := make([]any, len(cols), len(cols)+1)
	for j := range arrays {
		arrays[j].WriteByte(']')
		vars[j] = arrays[j].String()
	}
	return vars, nil
}

// eachValue hands put every value of rows, normalized (see normalize), in
// row order, and types each column left untyped from its values: a column
// NULL in every row is text. It is the one place the single-row and both
// many-row forms check and type values, so they refuse and type alike; an
// invalid value stops it, named by its row.
func eachValue(cols []Col, rows [][]any, put func(i, j int, v any)) error {
	for i, row := range rows {
		for j, v := range row {
			v, typ, err := normalize(cols[j].Name, v)
			if err != nil {
				return fmt.Errorf("batch row %d: %w", i, err)
			}
			if cols[j].Type == "" {
				cols[j].Type = typ
			}
			put(i, j, v)
		}
	}
	for j := range cols {
		if cols[j].Type == "" {
			cols[j].Type = "text"
		}
	}
	return nil
}

// appendString writes s, valid UTF-8, as a JSON string: its bytes as they
// are, but for the quote, the backslash and the control characters, which
// JSON escapes. encoding/json would also escape U+2028 and U+2029 (and <,
// >, &), and a server whose encoding is not UTF-8 (SQL_ASCII) cannot
// decode \u2028: a batch failed where a single write, bound as it is,
// stored it. Every escape here is ASCII, which every server encoding reads.
func appendString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// appendJSON writes "key":value, v a normalized value.
func appendJSON(b *bytes.Buffer, key string, v any) {
	b.WriteString(`"` + key + `":`)
	appendValue(b, v)
}

// appendValue writes v, a normalized value, as JSON.
func appendValue(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		appendString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	}
}

// normalize is v as the database driver would send it, with its SQL type
// ("" for NULL): pointers are followed and driver.Valuers asked for their
// value; an int is an int64; a string must be valid UTF-8.
func normalize(key string, v any) (any, string, error) {
	if dv, ok := v.(driver.Valuer); ok {
		var err error
		if v, err = dv.Value(); err != nil {
			return nil, "", err
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
		return nil, "", nil
	case string:
		if !utf8.ValidString(x) {
			return nil, "", fmt.Errorf("%s is %w", strings.TrimPrefix(key, "v_"), ErrInvalidUTF8)
		}
		return x, "text", nil
	case bool:
		return x, "boolean", nil
	case int64:
		return x, "bigint", nil
	case int:
		return int64(x), "bigint", nil
	}
	return nil, "", fmt.Errorf("batch value of type %T for %s", v, key)
}

// Text is a text column.
func Text(name string) Col { return Col{Name: name, Type: "text"} }

// Typed is a column typed from its values. A column NULL in every row (or
// in the one row of a batch of one) has no value to type it and is typed
// text, which PostgreSQL will not compare with or store in a bigint or
// boolean column: where every value may be NULL and the target is not text,
// give the Col its Type. (The fence's plans never send such a column: a
// value every write shares, NULL included, is bound as a parameter.)
func Typed(name string) Col { return Col{Name: name} }
