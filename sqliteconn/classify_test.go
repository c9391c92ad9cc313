package sqliteconn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassify: reads are only what cannot write; anything unknown takes
// the slot.
func TestClassify(t *testing.T) {
	cases := []struct {
		query string
		want  kind
	}{
		{"SELECT 1", reads},
		{"  select * from t", reads},
		{"(SELECT 1) UNION (SELECT 2)", reads},
		{"-- comment\nSELECT 1", reads},
		{"/* hint */ SELECT 1", reads},
		{"/* a */ -- b\n /* c */ SELECT 1", reads},
		{"-- a\n/* b */ DELETE FROM t", changesRows},
		{"EXPLAIN QUERY PLAN SELECT 1", reads},
		{"VALUES (1)", reads},
		{"INSERT INTO t VALUES (1)", changesRows},
		{"update t set a = 1 returning a", changesRows},
		{"DELETE FROM t", changesRows},
		{"REPLACE INTO t VALUES (1)", changesRows},
		{"WITH x AS (SELECT 1) DELETE FROM t", changesRows},
		{"CREATE TABLE t (a)", other},
		{"PRAGMA journal_mode", other},
		{"BEGIN", other},
		{"VACUUM", other},
		{"", other},
		{"-- only a comment", other},
		{"/* unterminated", other},
		{"SELECTED", other},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, classify(tc.query), tc.query)
	}
}
