package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm/clause"
)

// TestPlaceholdersMatchValues: every condition binds as many values as its
// text has placeholders (a mismatch fails only at run time, on the path
// that uses it). The statements themselves run on every database leg in
// integration_test's TestStoreConformance.
func TestPlaceholdersMatchValues(t *testing.T) {
	counts, countVars := QueueCounts(1, int64(1), 1)
	for name, e := range map[string]clause.Expr{
		"DueBy":           DueBy(1),
		"InPicked":        InPicked,
		"StillHeld":       StillHeld(int64(1)),
		"KeyInRows":       KeyInRows("rows(?, ?)", []any{1, 2}),
		"DueAtMost":       DueAtMost(1),
		"DueAfter":        DueAfter(1, "c", "o"),
		"QueueCounts":     {SQL: counts, Vars: countVars},
		"CASGuard":        CASGuard(1, 2, 3, 4, 5, 6, 7),
		"KeyIs":           KeyIs("c", "o"),
		"OwnerAfter":      OwnerAfter("o"),
		"StatusUnchanged": StatusUnchanged("c", "o", 1, "i", "s", nil),
		"SequenceBefore":  SequenceBefore(1),
		"ProvenanceIn":    ProvenanceIn("sub"),
		"Uncommitted":     Uncommitted,
		"StateIn":         StateIn("sub"),
		"FenceJoin":       FenceJoin,
		"RowValue":        RowValue("c"),
		"RowValueIf":      RowValueIf("c"),
		"RowGuard":        RowGuard("c", true),
		"Increment":       Increment("", "c"),
		"Plus":            Plus(1, 2),
		"RefusedAfter":    RefusedAfter(1, "r", "p"),
		"Below":           Below(`"c"`, 1),
	} {
		require.Equal(t, strings.Count(e.SQL, "?"), len(e.Vars), name)
	}
	require.Equal(t, strings.Count(casWrite, "?"), len(CASColumns)+1+7, "the write's SET and guard")
}

// TestStillHeldServesNoIndex: the batched write's state and lease
// condition is written as expressions no index matches, so both databases
// find each row by its key.
func TestStillHeldServesNoIndex(t *testing.T) {
	require.Contains(t, StillHeld(int64(1)).SQL, "state || '' = ?")
	require.Contains(t, StillHeld(int64(1)).SQL, "lease_expires_at + 0 >= ?")
}

// TestClaimBucket: a claim of n picks the smallest power of two at least
// n, so a pool's claims of every size from 1 to 2,048 share 12 statement
// texts.
func TestClaimBucket(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {50, 64}, {64, 64}, {65, 128}, {1000, 1024}, {2048, 2048},
		{1<<30 + 1, 1<<30 + 1}, // past the largest bucket, the limit itself
	} {
		require.Equal(t, c.want, ClaimBucket(c.n), "ClaimBucket(%d)", c.n)
	}
	texts := map[int]bool{}
	for n := 1; n <= 2048; n++ {
		texts[ClaimBucket(n)] = true
	}
	require.Len(t, texts, 12)
}
