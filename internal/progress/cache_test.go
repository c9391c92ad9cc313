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
