package progress

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func same(v []byte) []byte { return append([]byte(nil), v...) }

// TestGenerations: a put from a write that began before a forget (or
// before another put, or before an eviction that may have dropped one) is
// refused; a put from a write that began after is kept.
func TestGenerations(t *testing.T) {
	cases := []struct {
		name    string
		between func(c *Cache[string, []byte])
		kept    bool
	}{
		{"nothing in between", func(*Cache[string, []byte]) {}, true},
		{"a forget in between", func(c *Cache[string, []byte]) { c.Forget("k") }, false},
		{"another put in between", func(c *Cache[string, []byte]) { c.Put("k", []byte("7"), c.Snapshot()) }, false},
		{"another row changed", func(c *Cache[string, []byte]) { c.Put("other", []byte("7"), c.Snapshot()) }, true},
		{"a forget evicted", func(c *Cache[string, []byte]) { c.Forget("k"); c.Put("other", []byte("7"), c.Snapshot()) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string](1, same)
			since := c.Snapshot()
			tc.between(c)
			c.Put("k", []byte("3"), since)
			got, ok := c.Get("k")
			require.Equal(t, tc.kept, ok && string(got) == "3")
		})
	}
}

// TestRefusedPutDropsTheOlderEntry is the sequence of two writers on one
// row: B's write (v22) commits, A reads it and writes v23, then B's put
// lands and A's is refused. The cache must not keep B's v22, older than A's
// acknowledged write: it keeps nothing, so A's next update reads afresh.
// (It failed when a refused put left the entry that refused it.)
func TestRefusedPutDropsTheOlderEntry(t *testing.T) {
	c := New[string](4, same)
	sinceB := c.Snapshot() // B starts its write
	sinceA := c.Snapshot() // A starts after B's write committed
	c.Put("k", []byte("v22"), sinceB)
	c.Put("k", []byte("v23"), sinceA) // refused: B's put came after A's snapshot
	got, ok := c.Get("k")
	require.False(t, ok, "the cache holds %q, older than the refused v23", got)

	// A later write that starts after both is remembered again.
	c.Put("k", []byte("v24"), c.Snapshot())
	got, ok = c.Get("k")
	require.True(t, ok)
	require.Equal(t, "v24", string(got))
}

// TestRefusedPutRefusesOlderWrites: once a put returns, refused or not, no
// put of a write that committed before it is accepted, whatever refused it:
// a tombstone already there, or an eviction. In each case P starts after
// the refusing change but commits before W, and W's put comes first.
// (Both failed when a refused put stored nothing of its own.)
func TestRefusedPutRefusesOlderWrites(t *testing.T) {
	cases := []struct {
		name   string
		refuse func(c *Cache[string, []byte]) // a change after W's snapshot
	}{
		{"a tombstone", func(c *Cache[string, []byte]) { c.Forget("k") }},
		{"an eviction", func(c *Cache[string, []byte]) {
			c.Put("k", []byte("old"), c.Snapshot())
			c.Put("other", []byte("x"), c.Snapshot()) // size 1: evicts k
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string](1, same)
			sinceW := c.Snapshot()
			tc.refuse(c)
			sinceP := c.Snapshot()          // P starts, then writes 4
			c.Put("k", []byte("5"), sinceW) // W wrote 5 after P's 4: refused
			c.Put("k", []byte("4"), sinceP) // P's older write must not land
			got, ok := c.Get("k")
			require.False(t, ok, "the cache holds %q, older than W's refused 5", got)
		})
	}
}

// TestMonotonicUnderConcurrency: writers each put increasing versions of
// one row through a simulated store (a mutex-guarded counter, the row) and
// check that what Get hands them is never older than their own last put
// (run with -race).
func TestMonotonicUnderConcurrency(t *testing.T) {
	c := New[string](2, func(v int) int { return v })
	var (
		rowMu   sync.Mutex
		row     int
		wg      sync.WaitGroup
		backMu  sync.Mutex
		behind  int
		writers = 8
	)
	for range writers {
		wg.Go(func() {
			last := -1
			for range 2000 {
				since := c.Snapshot()
				if v, ok := c.Get("k"); ok && v < last {
					backMu.Lock()
					behind++
					backMu.Unlock()
				}
				rowMu.Lock() // the write: read the row, bump it, commit
				row++
				v := row
				rowMu.Unlock()
				c.Put("k", v, since)
				last = v
			}
		})
	}
	wg.Wait()
	require.Zero(t, behind, "Get handed a writer a version older than its own last put")
}

// TestNoAliasing: neither the value put nor the value got aliases what
// the cache holds.
func TestNoAliasing(t *testing.T) {
	c := New[string](4, same)
	v := []byte("abc")
	c.Put("k", v, c.Snapshot())
	v[0] = 'X'
	got, ok := c.Get("k")
	require.True(t, ok)
	require.Equal(t, "abc", string(got))
	got[0] = 'Y'
	again, _ := c.Get("k")
	require.Equal(t, "abc", string(again))
}

// TestBoundedAndConcurrent: the cache never holds more than its size, under
// concurrent puts, gets and forgets (run with -race).
func TestBoundedAndConcurrent(t *testing.T) {
	c := New[int](8, same)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (g*500 + i) % 20
				c.Put(k, []byte{byte(i)}, c.Snapshot())
				c.Get(k)
				if i%7 == 0 {
					c.Forget(k)
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.LessOrEqual(t, len(c.rows), 8)
}
