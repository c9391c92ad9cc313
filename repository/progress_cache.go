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

// progressEntry is what the cache holds of one row: the state a write left,
// or a tombstone (forgotten), stamped with the generation it was stored at.
type progressEntry struct {
	cur       SyncProgressCurrent
	gen       uint64
	forgotten bool
}

// progressCache remembers the row state each row's last CAS write left, so
// the next UpdateSyncProgress on that row can recompute from it and write
// in one round trip. It is only ever a guess: the write stays guarded on
// everything the recompute saw (version, incarnation, checkpoint and
// recovery), so a remembered state that is no longer stored, whoever
// changed it and whether or not they bumped the version (SetSyncState does
// not), fails its guard and the update falls back to a fresh read.
//
// Generations keep a forget from being undone by a write that was in flight
// when it happened: every put and forget takes the next generation, and a
// put is refused when the row changed in the cache (or a row was evicted)
// after the writer's snapshot. A refused put costs one uncached update,
// never a wrong one.
type progressCache struct {
	mu      sync.Mutex
	max     int
	rows    map[progressKey]progressEntry
	gen     uint64 // the last generation handed out
	evicted uint64 // the newest generation an eviction dropped
}

func newProgressCache(size int) *progressCache {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultProgressCache
	}
	return &progressCache{max: size, rows: make(map[progressKey]progressEntry)}
}

// snapshot is the generation a write starts at; pass it to put.
func (c *progressCache) snapshot() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// get returns a copy of the remembered state of k.
func (c *progressCache) get(k progressKey) (*SyncProgressCurrent, bool) {
	c.mu.Lock()
	e, ok := c.rows[k]
	c.mu.Unlock()
	if !ok || e.forgotten {
		return nil, false
	}
	cur := e.cur
	cur.Checkpoint, cur.Recovery = cloneJSON(cur.Checkpoint), cloneJSON(cur.Recovery)
	return &cur, true
}

// put remembers what a committed write that began at generation since left
// in k, unless k was put or forgotten after since, or an eviction may have
// dropped such a change.
func (c *progressCache) put(k progressKey, cur SyncProgressCurrent, since uint64) {
	cur.Checkpoint, cur.Recovery = cloneJSON(cur.Checkpoint), cloneJSON(cur.Recovery)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.rows[k]
	if (ok && e.gen > since) || (!ok && c.evicted > since) {
		return
	}
	c.store(k, progressEntry{cur: cur})
}

// forget drops what the cache remembers of k, so that no write already in
// flight puts it back.
func (c *progressCache) forget(k progressKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(k, progressEntry{forgotten: true})
}

// store sets k to e at the next generation, evicting an arbitrary row when
// full. Caller holds mu.
func (c *progressCache) store(k progressKey, e progressEntry) {
	if _, ok := c.rows[k]; !ok && len(c.rows) >= c.max {
		for old, oe := range c.rows {
			c.evicted = max(c.evicted, oe.gen)
			delete(c.rows, old)
			break
		}
	}
	c.gen++
	e.gen = c.gen
	c.rows[k] = e
}

func cloneJSON(j models.JSON) models.JSON {
	if j == nil {
		return nil
	}
	return bytes.Clone(j)
}

// progressCached returns the cache when this repository may use it: not in
// a caller's transaction (a write there may yet roll back, and a remembered
// state that never committed could match a later writer's guard), and
// without extra scopes (whose statements are built, not written out).
func (r *Repository) progressCached() *progressCache {
	if r.progress == nil || r.err != nil || len(r.scopes) > 0 || r.inCallerTx() {
		return nil
	}
	return r.progress
}

// forgetProgress drops what the cache remembers of a row another write
// changed. It runs after that write, in every repository copy (scoped or in
// a transaction), since they share the cache.
func (r *Repository) forgetProgress(connector, owner string) {
	if r.progress != nil {
		r.progress.forget(progressKey{connector, owner})
	}
}
