package jsonrows

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// valuer is a driver.Valuer, as models.JSON and models.Secret are.
type valuer string

func (v valuer) Value() (driver.Value, error) { return string(v) + "!", nil }

func TestTableEncodesAndTypes(t *testing.T) {
	n := int64(7)
	var none *string
	cols := []Col{Text("v_a"), Typed("v_b"), Typed("v_c"), Typed("v_d"), Typed("v_e")}
	sql, vars, err := Table("postgres", "v", cols, [][]any{
		{"x\"y", &n, true, none, valuer("w")},
		{"é", int64(-1), false, nil, valuer("z")},
	})
	require.NoError(t, err)
	require.Equal(t, `(SELECT CAST(r.v_a AS text) AS v_a, CAST(r.v_b AS bigint) AS v_b, CAST(r.v_c AS boolean) AS v_c, `+
		`CAST(r.v_d AS text) AS v_d, CAST(r.v_e AS text) AS v_e FROM ROWS FROM (`+
		`json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON)), json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON)), `+
		`json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON)), json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON)), `+
		`json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON))) AS r(v_a, v_b, v_c, v_d, v_e) LIMIT CAST(? AS BIGINT)) AS v`, sql)
	require.Equal(t, int64(2), vars[len(vars)-1], "the row count, last, bounds the table for the planner")
	var columns [][]any
	for _, v := range vars[:len(vars)-1] {
		var column []any
		require.NoError(t, json.Unmarshal([]byte(v.(string)), &column))
		columns = append(columns, column)
	}
	require.Equal(t, [][]any{{"x\"y", "é"}, {7.0, -1.0}, {true, false}, {nil, nil}, {"w!", "z!"}}, columns,
		"one JSON array per column, in the columns' order; NULL is JSON's null")
	require.Equal(t, "text", cols[3].Type, "a column NULL in every row is text")
}

func TestTableSQLite(t *testing.T) {
	sql, vars, err := Table("sqlite", "s", []Col{Text("owner_did"), Text("connector_name")}, [][]any{{"o", "c"}, {"p", "d"}})
	require.NoError(t, err)
	require.Equal(t, `(SELECT json_extract(value, '$.owner_did') AS owner_did, json_extract(value, '$.connector_name') AS connector_name FROM json_each(?) LIMIT ?) AS s`, sql)
	require.Equal(t, []any{`[{"owner_did":"o","connector_name":"c"},{"owner_did":"p","connector_name":"d"}]`, int64(2)}, vars)
}

// TestTableOneRow: one row is bound value by value, checked and typed as
// the many-row forms' rows are, the same text on both databases.
func TestTableOneRow(t *testing.T) {
	n := int64(7)
	var none *string
	for _, dialect := range []string{"postgres", "sqlite"} {
		cols := []Col{Text("v_a"), Typed("v_b"), Typed("v_c"), Typed("v_d"), Typed("v_e")}
		sql, vars, err := Table(dialect, "v", cols, [][]any{{"x\"y", &n, true, none, valuer("w")}})
		require.NoError(t, err)
		require.Equal(t, `(SELECT CAST(? AS text) AS v_a, CAST(? AS bigint) AS v_b, CAST(? AS boolean) AS v_c, `+
			`CAST(? AS text) AS v_d, CAST(? AS text) AS v_e) AS v`, sql)
		require.Equal(t, []any{"x\"y", int64(7), true, nil, "w!"}, vars)
	}
	_, _, err := Table("postgres", "v", []Col{Text("v_lease_token")}, [][]any{{"bad\xff"}})
	require.ErrorIs(t, err, ErrInvalidUTF8)
	require.EqualError(t, err, "batch row 0: lease_token is not valid UTF-8")
}

// The statement's text does not depend on the number of rows (past one).
func TestTableTextIndependentOfSize(t *testing.T) {
	one, _, err := Table("postgres", "v", []Col{Text("v_a")}, [][]any{{"a"}, {"b"}})
	require.NoError(t, err)
	many := make([][]any, 20000)
	for i := range many {
		many[i] = []any{"a"}
	}
	big, vars, err := Table("postgres", "v", []Col{Text("v_a")}, many)
	require.NoError(t, err)
	require.Equal(t, one, big)
	require.Equal(t, int64(20000), vars[len(vars)-1])
}

func TestTableRefuses(t *testing.T) {
	_, _, err := Table("postgres", "v", []Col{Text("v_lease_token")}, [][]any{{"ok"}, {"bad\xff"}})
	require.ErrorIs(t, err, ErrInvalidUTF8)
	require.EqualError(t, err, "batch row 1: lease_token is not valid UTF-8")
	_, _, err = Table("postgres", "v", []Col{Typed("v_x")}, [][]any{{3.5}})
	require.Error(t, err, "a type the encoder does not know")
	require.False(t, errors.Is(err, ErrInvalidUTF8))
}

// TestStringsAsJSON: every string encodes to JSON that decodes back to it,
// with its bytes as they are but for the quote, the backslash and control
// characters: U+2028 and U+2029 stay raw (a server in SQL_ASCII cannot
// decode their escapes), so do <, > and &.
func TestStringsAsJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `x"y`, `back\slash`, "\\\"", "tab\tnl\ncr\r", "\x01\x1f\x7f",
		"line\u2028para\u2029", "<a>&b", "é😀", "\ufeff"} {
		var b bytes.Buffer
		appendString(&b, s)
		var back string
		require.NoError(t, json.Unmarshal(b.Bytes(), &back), "%q as %s", s, b.String())
		require.Equal(t, s, back)
		require.NotContains(t, b.String(), `\u20`, "U+2028 and U+2029 are written as they are")
		require.NotContains(t, b.String(), `\u003c`)
	}
	var b bytes.Buffer
	appendString(&b, "a\u2028b\x01")
	require.Equal(t, "\"a\u2028b\\u0001\"", b.String())
}
