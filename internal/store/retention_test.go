package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSQLStrings: constants become quoted SQL literals, quotes doubled.
func TestSQLStrings(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"committed"}, "'committed'"},
		{[]string{"committed", "dead"}, "'committed', 'dead'"},
		{[]string{"it's"}, "'it''s'"},
	} {
		require.Equal(t, tc.want, sqlStrings(tc.in...))
	}
}

// TestKeepRuleProbesOnlyTheDocumentIndexes: the keep rules' probes name the
// state as an expression, so no index on state can serve them (a planner
// without statistics read every committed row per probe through one).
func TestKeepRuleProbesOnlyTheDocumentIndexes(t *testing.T) {
	require.Equal(t, 4, strings.Count(superseded, "n.state || '' IN ("))
	require.NotContains(t, superseded, "n.state IN")
	require.Contains(t, Recheck, "state || '' IN ("+finishedStates+")")
}
