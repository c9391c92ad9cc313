package repository

import (
	"errors"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestRequireTextNamesTheField: requireText builds the faulty field's name
// only when it fails; the name is the path from the call's own name through
// fields (embedded structs add none) and slice elements.
func TestRequireTextNamesTheField(t *testing.T) {
	type Inner struct{ Owner string }
	type Embedded struct{ Note *string }
	type Item struct {
		Name string
		Doc  models.JSON
	}
	type Params struct {
		Key Inner
		Embedded
		Items []Item
		Raw   []byte
		Any   any
		skip  string
	}
	bad := "a\x00b"
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"clean", Params{Key: Inner{"o"}, Items: []Item{{Name: "x", Doc: models.JSON(`{}`)}}, Raw: []byte{0xff, 0}, skip: bad}, ""},
		{"nested field", Params{Key: Inner{bad}}, "params.Key.Owner contains a NUL byte"},
		{"embedded field", Params{Embedded: Embedded{&bad}}, "params.Note contains a NUL byte"},
		{"slice element", Params{Items: []Item{{Name: "ok"}, {Name: "\xff"}}}, "params.Items[1].Name is not valid UTF-8"},
		{"JSON document", Params{Items: []Item{{Doc: models.JSON("\"\xff\"")}}}, "params.Items[0].Doc is not valid UTF-8"},
		{"interface", Params{Any: Inner{bad}}, "params.Any.Owner contains a NUL byte"},
		{"first fault wins", Params{Key: Inner{"\xff"}, Items: []Item{{Name: bad}}}, "params.Key.Owner is not valid UTF-8"},
		{"string", bad, "params contains a NUL byte"},
		{"slice of strings", []string{"ok", bad}, "params[1] contains a NUL byte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := requireText("params", tc.in)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, errors.Is(err, ErrInvalidInput), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Without a name of its own, the path starts at the first field.
	require.ErrorContains(t, requireText("", Params{Key: Inner{bad}}), "invalid input: Key.Owner contains")
}
