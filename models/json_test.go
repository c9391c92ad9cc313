package models_test

import (
	"encoding/json"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

func TestJSONScan(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		src     any
		want    string // "" means NULL
		wantErr bool
	}{
		{"nil", nil, "", false},
		{"string", `{"a": [1, 2]}`, `{"a":[1,2]}`, false},
		{"bytes", []byte(` [true] `), `[true]`, false},
		{"null literal", "null", "", false},
		{"decoded map", map[string]any{"k": "v"}, `{"k":"v"}`, false},
		{"decoded number", 42.5, `42.5`, false},
		{"decoded slice", []any{"x", 1.0}, `["x",1]`, false},
		{"malformed string", `{"a":`, "", true},
		{"malformed bytes", []byte(`nope`), "", true},
		{"empty string", "", "", true},
		{"undecodable value", func() {}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := models.JSON(`"sentinel"`)
			err := j.Scan(tc.src)
			if tc.wantErr {
				require.ErrorIs(t, err, models.ErrMalformedJSON)
				require.Equal(t, `"sentinel"`, string(j), "a failed scan leaves the value alone")
				return
			}
			require.NoError(t, err)
			if tc.want == "" {
				require.True(t, j.IsNull())
				return
			}
			require.Equal(t, tc.want, string(j))
		})
	}
}

func TestJSONValueAndDecode(t *testing.T) {
	t.Parallel()
	v, err := models.JSON(nil).Value()
	require.NoError(t, err)
	require.Nil(t, v, "nil writes SQL NULL")

	j, err := models.NewJSON(map[string]int{"n": 3})
	require.NoError(t, err)
	v, err = j.Value()
	require.NoError(t, err)
	require.Equal(t, `{"n":3}`, v)

	var out struct{ N int }
	require.NoError(t, j.Decode(&out))
	require.Equal(t, 3, out.N)
	require.ErrorIs(t, models.JSON(`[1]`).Decode(&out), models.ErrMalformedJSON)

	none, err := models.NewJSON(nil)
	require.NoError(t, err)
	require.True(t, none.IsNull())
	_, err = models.NewJSON(make(chan int))
	require.ErrorIs(t, err, models.ErrMalformedJSON)

	nested, err := json.Marshal(struct{ J models.JSON }{J: j})
	require.NoError(t, err)
	require.Equal(t, `{"J":{"n":3}}`, string(nested))
	var back struct{ J models.JSON }
	require.NoError(t, json.Unmarshal(nested, &back))
	require.Equal(t, j, back.J)
}

// FuzzJSONScan: Scan never panics, accepts exactly what encoding/json calls
// valid, and what it accepts round-trips through Value.
func FuzzJSONScan(f *testing.F) {
	for _, seed := range []string{`{}`, `[1,"a",null]`, `"s"`, `null`, `{"a":`, ``, ` 1e400 `, "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var j models.JSON
		err := j.Scan(s)
		if !json.Valid([]byte(s)) {
			require.ErrorIs(t, err, models.ErrMalformedJSON)
			return
		}
		require.NoError(t, err)
		v, err := j.Value()
		require.NoError(t, err)
		if v == nil {
			return
		}
		var again models.JSON
		require.NoError(t, again.Scan([]byte(v.(string))))
		require.Equal(t, j, again)
	})
}
