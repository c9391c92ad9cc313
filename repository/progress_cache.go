package repository

import (
	"bytes"

	"github.com/connstore/connstore/internal/progress"
	"github.com/connstore/connstore/models"
)

// DefaultProgressCache is how many sync-state rows UpdateSyncProgress
// remembers when Options.ProgressCache is zero.
const DefaultProgressCache = 1024

// progressKey names one sync-state row.
type progressKey struct{ connector, owner string }

// progressCache remembers the row state each row's last CAS write left
// (see package progress for why it is safe).
type progressCache = progress.Cache[progressKey, SyncProgressCurrent]

func newProgressCache(size int) *progressCache {
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultProgressCache
	}
	return progress.New[progressKey](size, cloneCurrent)
}

// cloneCurrent copies the documents and the error message a remembered
// state holds, so the cache never aliases a caller's recompute.
func cloneCurrent(cur SyncProgressCurrent) SyncProgressCurrent {
	cur.Checkpoint, cur.Recovery = cloneJSON(cur.Checkpoint), cloneJSON(cur.Recovery)
	if cur.Error != nil {
		msg := *cur.Error
		cur.Error = &msg
	}
	return cur
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
		r.progress.Forget(progressKey{connector, owner})
	}
}
