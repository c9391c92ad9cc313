package repository

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestInKeyOrder: claimed rows come back in (caller, operation id) order,
// bytewise, whatever order the database returned them in.
func TestInKeyOrder(t *testing.T) {
	op := func(c, id string) models.Operation {
		return models.Operation{CallerDID: c, OperationID: id, NodeKey: c + id}
	}
	for _, tc := range []struct {
		name     string
		in, want []models.Operation
	}{
		{"empty", nil, []models.Operation{}},
		{"one", []models.Operation{op("a", "1")}, []models.Operation{op("a", "1")}},
		{"callers then ids", []models.Operation{op("b", "1"), op("a", "2"), op("a", "10"), op("B", "9")},
			[]models.Operation{op("B", "9"), op("a", "10"), op("a", "2"), op("b", "1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, inKeyOrder(tc.in))
		})
	}
}
