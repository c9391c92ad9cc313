package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DefaultMaxRetries is the CAS retry bound when none is given: 5 retries,
// so 6 attempts. Callers normally pass their own authoritative bound.
const DefaultMaxRetries = 5

// SyncProgressCurrent is the row state a recompute starts from.
type SyncProgressCurrent struct {
	// Checkpoint and Recovery are the stored documents (nil for NULL).
	Checkpoint, Recovery models.JSON
	// Error is the stored error message (nil for none). Each progress write
	// stores the error its result names (the seed's rule), so a recompute
	// that means to keep a status's message (SetSyncStatus) returns it:
	// SyncProgressResult{…, Error: current.Error}.
	Error *string
	// Version and Incarnation are the lock the row was read at.
	Version     int64
	Incarnation string
}

// SyncProgressResult is what a recompute wants written.
type SyncProgressResult struct {
	// Checkpoint and Recovery are the new documents (nil for NULL).
	Checkpoint, Recovery models.JSON
	// LastSyncedAt is the sync time as the connector formats it.
	LastSyncedAt string
	// EntityCount is the number of entities synced; never negative.
	EntityCount int64
	// Error is the error message to store, or nil to clear it.
	Error *string
}

// RecomputeFunc derives the new progress from the current row, or from nil
// when there is no row yet. It may run several times, once per attempt, and
// must not have side effects that assume it ran once. An error aborts the
// update without writing.
type RecomputeFunc func(ctx context.Context, current *SyncProgressCurrent) (SyncProgressResult, error)

// UpdateSyncProgressParams addresses one row and says how to recompute it.
type UpdateSyncProgressParams struct {
	// Key names the row. (A named field, not an embedded one: the key's
	// String method would otherwise print the params as just the key.)
	Key ConnectorKey
	// Recompute derives the new state; required.
	Recompute RecomputeFunc
	// MaxRetries bounds re-reads after a lost CAS; nil means
	// DefaultMaxRetries. Attempts made are MaxRetries+1.
	MaxRetries *int
}

// UpdateSyncProgress writes progress by compare-and-swap: read, recompute,
// then one UPDATE that bumps version and never writes status (the workflow
// owns it), guarded on everything the recompute saw: version, incarnation,
// checkpoint, recovery and error. The seed guards on version and
// incarnation only; the stored values are guarded too because SetSyncState
// rewrites them
// without bumping the version, and a version-only guard would let an update
// that read before the reset undo it. A lost CAS (a concurrent writer, a
// reset, a delete+recreate) re-reads and recomputes. With no row it inserts
// with status idle, ON CONFLICT DO NOTHING, so a lost insert race falls
// through to the update path. After MaxRetries+1 lost attempts it returns a
// *RetriesExhaustedError.
//
// Outside a caller's transaction the repository remembers the state its
// last write left in the row (Options.ProgressCache), and the next update of
// that row first recomputes from it and writes, guarded the same way: one
// round trip while this repository is the row's only writer. If the guard
// no longer matches, or the recompute fails on the remembered state, that
// attempt is not counted and the update goes on from a fresh read.
func (r *Repository) UpdateSyncProgress(ctx context.Context, p UpdateSyncProgressParams) (err error) {
	ctx, end := r.start(ctx, "UpdateSyncProgress")
	defer end(&err)
	maxRetries, err := validateUpdateProgress(p)
	if err == nil {
		err = r.inScope(ctx, p.Key.OwnerDID, p.Key.ConnectorName)
	}
	if err != nil {
		return fmt.Errorf("update sync progress: %w", err)
	}
	done, err := r.tryRemembered(ctx, p) // uncounted: a stale guess is not a lost race
	for attempt := 0; err == nil && !done && attempt <= maxRetries; attempt++ {
		if attempt > 0 {
			r.emit(ctx, EventCASRetry, 1, "")
		}
		done, err = r.tryUpdateProgress(ctx, p)
	}
	switch {
	case err != nil:
		return fmt.Errorf("update sync progress %s/%s: %w", p.Key.ConnectorName, p.Key.OwnerDID, err)
	case done:
		return nil
	}
	r.emit(ctx, EventCASExhausted, 1, "")
	return &RetriesExhaustedError{ConnectorName: p.Key.ConnectorName, OwnerDID: p.Key.OwnerDID, Attempts: maxRetries + 1}
}

// casValues gives res's values in store.CASColumns' order: both forms of
// the write (store.CAS.Write and the scoped builder) are made from them, so
// they cannot set different columns.
func casValues(res SyncProgressResult) []any {
	return []any{res.Checkpoint, res.LastSyncedAt, res.EntityCount, res.Error, res.Recovery}
}

// casRow is what one CAS attempt reads.
type casRow struct {
	Checkpoint, Recovery models.JSON
	Error                *string
	Version              int64
	Incarnation          *string
}

// tryUpdateProgress makes one attempt; done is false when the attempt lost
// a race and should be retried. The read and the guarded write are the
// repository's own statements: the CAS does not depend on the plugin's
// callbacks (or their cost), and status is deliberately not written.
func (r *Repository) tryUpdateProgress(ctx context.Context, p UpdateSyncProgressParams) (done bool, err error) {
	since := r.progressSnapshot()
	row, err := r.readProgress(ctx, p)
	if err != nil {
		return false, err
	}
	if row == nil {
		return r.insertProgress(ctx, p, since)
	}
	if row.Incarnation == nil || *row.Incarnation == "" {
		return false, fmt.Errorf("%w: sync state %s/%s has no incarnation", hooks.ErrMissingLock, p.Key.ConnectorName, p.Key.OwnerDID)
	}
	cur := &SyncProgressCurrent{Checkpoint: row.Checkpoint, Recovery: row.Recovery, Error: row.Error,
		Version: row.Version, Incarnation: *row.Incarnation}
	res, err := recompute(ctx, p.Recompute, cur)
	if err != nil {
		return false, err
	}
	return r.writeProgress(ctx, p, cur, res, since)
}

// tryRemembered makes the uncounted attempt from the remembered state; done
// is false when there is none, it is stale, or the recompute refused it (a
// remembered state the stored row has moved past may be one a recompute
// rightly rejects: the fresh read decides).
func (r *Repository) tryRemembered(ctx context.Context, p UpdateSyncProgressParams) (bool, error) {
	cache := r.progressCached()
	if cache == nil {
		return false, nil
	}
	k := progressKey{p.Key.ConnectorName, p.Key.OwnerDID}
	since := cache.Snapshot()
	cur, ok := cache.Get(k)
	if !ok {
		return false, nil
	}
	res, err := recompute(ctx, p.Recompute, &cur)
	if err != nil {
		cache.Forget(k)
		return false, ctx.Err() // a cancelled call stops here; any other error is the fresh read's to repeat
	}
	done, err := r.writeProgress(ctx, p, &cur, res, since)
	if err == nil && !done {
		cache.Forget(k)
	}
	return done, err
}

// writeProgress writes res guarded on cur (store.CASGuard: everything a
// recompute saw, checkpoint, recovery and error included, since SetSyncState
// rewrites those without bumping the version); done is false when
// the guard no longer matched. Status is deliberately not written.
func (r *Repository) writeProgress(ctx context.Context, p UpdateSyncProgressParams, cur *SyncProgressCurrent,
	res SyncProgressResult, since uint64) (done bool, err error) {
	guard := []any{p.Key.ConnectorName, p.Key.OwnerDID, cur.Version, cur.Incarnation, cur.Checkpoint, cur.Recovery, cur.Error}
	var tx *gorm.DB
	values := append(casValues(res), cur.Version+1)
	if len(r.scopes) == 0 {
		tx = r.cas.Write(r.conn(ctx), values, guard)
	} else {
		set := make(map[string]any, len(values))
		for i, col := range slices.Concat(store.CASColumns, []string{"version"}) {
			set[col] = values[i]
		}
		tx = hooks.SkipLock(r.conn(ctx)).Model(&models.SyncState{}).Where(store.CASGuard(guard...)).UpdateColumns(set)
	}
	if tx.Error != nil || tx.RowsAffected != 1 {
		return false, tx.Error
	}
	r.remember(p, SyncProgressCurrent{Checkpoint: res.Checkpoint, Recovery: res.Recovery, Error: res.Error,
		Version: cur.Version + 1, Incarnation: cur.Incarnation}, since)
	return true, nil
}

// progressSnapshot is the cache generation a write starts at (0 without a
// usable cache).
func (r *Repository) progressSnapshot() uint64 {
	if cache := r.progressCached(); cache != nil {
		return cache.Snapshot()
	}
	return 0
}

// remember stores what a committed write that began at generation since
// left in the row, where the cache may be used. Where it may not (a
// caller's transaction, a scoped repository) the write still moved the row
// past what the shared cache holds, so the row is forgotten: kept, the
// older entry would be the next plain call's recompute, a state older than
// its caller's own acknowledged write. Forgotten at the write, before a
// caller's transaction commits, is early enough: a writer that reads the
// older state meanwhile cannot land its write before that transaction ends
// (the row is locked), and then its guard fails.
func (r *Repository) remember(p UpdateSyncProgressParams, cur SyncProgressCurrent, since uint64) {
	if cache := r.progressCached(); cache != nil {
		cache.Put(progressKey{p.Key.ConnectorName, p.Key.OwnerDID}, cur, since)
		return
	}
	r.forgetProgress(p.Key.ConnectorName, p.Key.OwnerDID)
}

// readProgress reads the row a CAS attempt starts from; nil when there is
// none.
func (r *Repository) readProgress(ctx context.Context, p UpdateSyncProgressParams) (*casRow, error) {
	if len(r.scopes) > 0 {
		var rows []casRow
		err := r.primary(ctx).Model(&models.SyncState{}).Select(store.CASReadColumns).
			Where(store.KeyIs(p.Key.ConnectorName, p.Key.OwnerDID)).Limit(1).Scan(&rows).Error
		if err != nil || len(rows) == 0 {
			return nil, err
		}
		return &rows[0], nil
	}
	var row casRow
	found, err := r.cas.Read(r.primary(ctx), p.Key.ConnectorName, p.Key.OwnerDID, &row.Checkpoint, &row.Recovery, &row.Error, &row.Version, &row.Incarnation)
	if err != nil || !found {
		return nil, err
	}
	return &row, nil
}

// insertProgress creates the missing row; done is false when a concurrent
// writer created it first.
func (r *Repository) insertProgress(ctx context.Context, p UpdateSyncProgressParams, since uint64) (done bool, err error) {
	res, err := recompute(ctx, p.Recompute, nil)
	if err != nil {
		return false, err
	}
	row := models.SyncState{
		ConnectorName: p.Key.ConnectorName, OwnerDID: p.Key.OwnerDID,
		Checkpoint: res.Checkpoint, LastSyncedAt: res.LastSyncedAt, EntityCount: res.EntityCount,
		Status: models.SyncStatusIdle, Error: res.Error, Recovery: res.Recovery,
	}
	tx := r.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if tx.Error != nil || tx.RowsAffected == 0 {
		return false, tx.Error
	}
	if row.Incarnation != nil {
		r.remember(p, SyncProgressCurrent{Checkpoint: res.Checkpoint, Recovery: res.Recovery, Error: res.Error,
			Version: row.Version, Incarnation: *row.Incarnation}, since)
	}
	return true, nil
}

// recompute runs fn and validates what it returns before anything is written.
func recompute(ctx context.Context, fn RecomputeFunc, cur *SyncProgressCurrent) (SyncProgressResult, error) {
	res, err := fn(ctx, cur)
	if err != nil {
		return res, fmt.Errorf("recompute: %w", err)
	}
	if err := errors.Join(requireText("result", res),
		validateProgress(res.LastSyncedAt, res.EntityCount, res.Checkpoint, res.Recovery)); err != nil {
		return res, fmt.Errorf("recompute result: %w", err)
	}
	return res, nil
}

func validateUpdateProgress(p UpdateSyncProgressParams) (int, error) {
	if err := requireKeys("connector", p.Key.ConnectorName, "owner", p.Key.OwnerDID); err != nil {
		return 0, err
	}
	if p.Recompute == nil {
		return 0, invalid("recompute is nil")
	}
	return maxRetriesOf(p.MaxRetries)
}

// maxRetriesOf is a CAS loop's retry bound: *p, or DefaultMaxRetries for
// nil; a negative bound is refused.
func maxRetriesOf(p *int) (int, error) {
	switch {
	case p == nil:
		return DefaultMaxRetries, nil
	case *p < 0:
		return 0, invalid("max retries %d is negative", *p)
	}
	return *p, nil
}
