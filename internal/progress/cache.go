// Package progress is the progress cache: what each row's last
// compare-and-swap write left, so the next update of that row can
// recompute from it and write in one round trip.
//
// It is only ever a guess: the write stays guarded on everything the
// recompute saw, so a remembered state that is no longer stored, whoever
// changed it and whether or not they bumped the version, fails its guard
// and the update falls back to a fresh read.
//
// Generations keep a forget from being undone by a write that was in flight
// when it happened: every put and forget takes the next generation, and a
// put is refused when the row changed in the cache (or a row was evicted)
// after the writer's snapshot.
//
// A refused put also drops what the cache holds of its row. The entry that
// refused it may be older than the refused write: two writers B and A, B's
// write commits, A reads it and writes the next version, then B's put lands
// (nothing changed since B's snapshot) and A's is refused (B's put came
// after A's snapshot). Keeping B's entry would hand A's next recompute a
// state older than A's own acknowledged write. Dropping it costs one
// uncached update, never a wrong or a backward one: the cache only ever
// holds the newest write it was told of, or nothing (monotonic reads per
// cache). The repository tells it of every write of its own: the ones it
// may not remember (a caller's transaction, a scoped copy) forget the row.
package progress

import "sync"

// entry is what the cache holds of one row: the state a write left, or a
// tombstone (forgotten), stamped with the generation it was stored at.
type entry[V any] struct {
	v         V
	gen       uint64
	forgotten bool
}

// Cache remembers one value per key, at most Max keys, a forgotten key's
// tombstone among them (a refused put stores one, which may evict another
// key's entry: a cost in misses, never in correctness). It is safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int
	clone   func(V) V
	rows    map[K]entry[V]
	gen     uint64 // the last generation handed out
	evicted uint64 // the newest generation an eviction dropped
}

// New returns a cache of at most size rows (size > 0). clone copies a value
// so that what the cache holds never aliases a caller's.
func New[K comparable, V any](size int, clone func(V) V) *Cache[K, V] {
	return &Cache[K, V]{max: max(size, 1), clone: clone, rows: make(map[K]entry[V])}
}

// Snapshot is the generation a write starts at; pass it to Put.
func (c *Cache[K, V]) Snapshot() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Get returns a copy of the remembered value of k.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	e, ok := c.rows[k]
	c.mu.Unlock()
	if !ok || e.forgotten {
		var zero V
		return zero, false
	}
	return c.clone(e.v), true
}

// Put remembers what a committed write that began at generation since left
// in k, unless k was put or forgotten after since, or an eviction may have
// dropped such a change. A refused put forgets k (see the package comment:
// what refused it may be older than v), and takes a generation of its own
// even when k is already forgotten or absent: a write still in flight on k
// may have committed before this one, so its put must be refused too, and
// a tombstone or an eviction older than its snapshot would not refuse it.
func (c *Cache[K, V]) Put(k K, v V, since uint64) {
	v = c.clone(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.rows[k]
	if (ok && e.gen > since) || (!ok && c.evicted > since) {
		c.store(k, entry[V]{forgotten: true})
		return
	}
	c.store(k, entry[V]{v: v})
}

// Forget drops what the cache remembers of k, so that no write already in
// flight puts it back.
func (c *Cache[K, V]) Forget(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(k, entry[V]{forgotten: true})
}

// store sets k to e at the next generation, evicting an arbitrary row when
// full. Caller holds mu.
func (c *Cache[K, V]) store(k K, e entry[V]) {
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
