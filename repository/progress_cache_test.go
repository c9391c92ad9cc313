package repository

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProgressCacheGenerations: a put from a write that began before a
// forget (or before another put, or before an eviction that may have
// dropped one) is refused; a put from a write that began after is kept.
func TestProgressCacheGenerations(t *testing.T) {
	k, other := progressKey{"crm", "o"}, progressKey{"crm", "p"}
	cur := func(v int64) SyncProgressCurrent { return SyncProgressCurrent{Version: v, Incarnation: "i"} }
	cases := []struct {
		name    string
		between func(c *progressCache)
		kept    bool
	}{
		{"nothing in between", func(*progressCache) {}, true},
		{"a forget in between", func(c *progressCache) { c.forget(k) }, false},
		{"another put in between", func(c *progressCache) { c.put(k, cur(7), c.snapshot()) }, false},
		{"another row changed", func(c *progressCache) { c.put(other, cur(7), c.snapshot()) }, true},
		{"a forget evicted", func(c *progressCache) { c.forget(k); c.put(other, cur(7), c.snapshot()) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newProgressCache(1)
			since := c.snapshot()
			tc.between(c)
			c.put(k, cur(3), since)
			got, ok := c.get(k)
			require.Equal(t, tc.kept, ok && got.Version == 3)
		})
	}
}
