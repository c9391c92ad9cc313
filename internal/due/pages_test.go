package due

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// table is a sorted in-memory table read by key, counting its reads.
type table struct {
	keys  []int
	reads int
}

func (t *table) read(after []any, limit int) ([]int, error) {
	t.reads++
	var out []int
	for _, k := range t.keys {
		if (after == nil || k > after[0].(int)) && len(out) < limit {
			out = append(out, k)
		}
	}
	return out, nil
}

func keyOf(k *int) []any { return []any{*k} }

// TestPages: every row once, in order, in pages of at most size, with one
// read past a full last page and none past a short one.
func TestPages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rows      int
		size      int
		wantPages int
		wantReads int
	}{
		{"empty", 0, 3, 0, 1},
		{"short", 2, 3, 1, 1},
		{"exact", 6, 3, 2, 3},
		{"uneven", 7, 3, 3, 3},
		{"one per page", 3, 1, 3, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := &table{}
			for i := range tc.rows {
				tb.keys = append(tb.keys, i*10)
			}
			var got []int
			pages := 0
			err := Pages(context.Background(), tc.size, tb.read, keyOf, func(p []int) error {
				require.LessOrEqual(t, len(p), tc.size)
				pages++
				got = append(got, p...)
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, len(tb.keys), len(got))
			if len(got) > 0 {
				require.Equal(t, tb.keys, got)
			}
			require.Equal(t, tc.wantPages, pages)
			require.Equal(t, tc.wantReads, tb.reads)
		})
	}
}

// TestPagesStops: a read's or fn's error ends the loop with that error, and
// so does a context ended between pages.
func TestPagesStops(t *testing.T) {
	boom := errors.New("boom")
	tb := &table{keys: []int{1, 2, 3, 4, 5}}
	err := Pages(context.Background(), 2, func([]any, int) ([]int, error) { return nil, boom }, keyOf,
		func([]int) error { return nil })
	require.ErrorIs(t, err, boom)

	calls := 0
	err = Pages(context.Background(), 2, tb.read, keyOf, func([]int) error { calls++; return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, calls)

	ctx, cancel := context.WithCancel(context.Background())
	tb.reads = 0
	err = Pages(ctx, 2, tb.read, keyOf, func([]int) error { cancel(); return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, tb.reads, "no read after the context ended")
}
