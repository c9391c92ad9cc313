package repository

import (
	"bytes"
	"sync"

	"github.com/connstore/connstore/models"
)

// DefaultProgressCache is how many sync-state rows UpdateSyncProgress
// remembers when Options.ProgressCache is zero.
const DefaultProgressCache = 1024

// progressKey names one sync-state row.
type progressKey struct{ connector, owner string }

// progressCache remembers the row state each row's last CAS write left, so
// the next UpdateSyncProgress on that row can recompute from it and write
// in one round trip. It is only ever a guess: the write stays guarded on the
// remembered version and incarnation, which every committed write moves (the
// hooks plugin bumps version on every update, a recreated row has a new
// incarnation), so a guard that still matches proves the row is exactly what
// was remembered, and one that does not falls back to the read.
type progressCache struct {
	mu   sync.Mutex
	max  int
	rows map[progressKey]SyncProgressCurrent
}

func newProgressCache(size int) *progressCache {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultProgressCache
	}
	return &progressCache{max: size, rows: make(map[progressKey]SyncProgressCurrent)}
}

// get returns a copy of the remembered state of k.
func (c *progressCache) get(k progressKey) (*SyncProgressCurrent, bool) {
	c.mu.Lock()
	cur, ok := c.rows[k]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	cur.Checkpoint, cur.Recovery = cloneJSON(cur.Checkpoint), cloneJSON(cur.Recovery)
	return &cur, true
}

// put remembers what a committed write left in k, evicting an arbitrary row
// when full.
func (c *progressCache) put(k progressKey, cur SyncProgressCurrent) {
	cur.Checkpoint, cur.Recovery = cloneJSON(cur.Checkpoint), cloneJSON(cur.Recovery)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.rows[k]; !ok && len(c.rows) >= c.max {
		for old := range c.rows {
			delete(c.rows, old)
			break
		}
	}
	c.rows[k] = cur
}

func (c *progressCache) forget(k progressKey) {
	c.mu.Lock()
	delete(c.rows, k)
	c.mu.Unlock()
}

func cloneJSON(j models.JSON) models.JSON {
	if j == nil {
		return nil
	}
	return bytes.Clone(j)
}

// progressCached returns the cache when this repository may use it: not in
// a caller's transaction (a write there may yet roll back, and a remembered
// state that never committed could match a later writer's version), and
// without extra scopes (whose statements are built, not written out).
func (r *Repository) progressCached() *progressCache {
	if r.progress == nil || r.err != nil || len(r.scopes) > 0 || r.inCallerTx() {
		return nil
	}
	return r.progress
}

// forgetProgress drops what the cache remembers of a row another write
// changed.
func (r *Repository) forgetProgress(connector, owner string) {
	if r.progress != nil {
		r.progress.forget(progressKey{connector, owner})
	}
}
