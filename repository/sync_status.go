package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
)

// SetSyncStatusParams changes one sync state's workflow status.
type SetSyncStatusParams struct {
	// Key names the row. (A named field, not an embedded one: the key's
	// String method would otherwise print the params as just the key.)
	Key ConnectorKey
	// Status is one of the models.SyncStatus* values.
	Status string
	// Error is the error message stored with the status; nil clears it.
	// UpdateSyncProgress writes the error column too (the seed's progress
	// update stores its result's error), so a progress write after this one
	// replaces the message unless its recompute keeps it: it sees the
	// stored message as SyncProgressCurrent.Error and is guarded on it, so
	// it never overwrites a message it did not see.
	Error *string
	// IfStatus, when not empty, lists the statuses the row must hold for
	// the change to be made (e.g. only "syncing" may become "idle"); any
	// other is a *StateError and nothing is written.
	IfStatus []string
	// MaxRetries bounds the compare-and-swap attempts lost to concurrent
	// writers, as in UpdateSyncProgress; nil means DefaultMaxRetries.
	MaxRetries *int
}

// SetSyncStatus changes the status (and error) of an existing sync state
// by compare-and-swap on its version and incarnation (and the status and
// error it read, which SetSyncState rewrites in place), leaving checkpoint,
// recovery, counts and last sync time alone: unlike SetSyncState, it cannot
// undo a progress update that lands between a caller's read and its write,
// and a progress update that read before it retries from the new version,
// so neither write is lost. It returns the stored row. A missing row is
// ErrNotFound (status is the workflow's, progress creates the row); after
// MaxRetries+1 lost attempts it returns a *RetriesExhaustedError.
func (r *Repository) SetSyncStatus(ctx context.Context, p SetSyncStatusParams) (_ *models.SyncState, err error) {
	ctx, end := r.start(ctx, "SetSyncStatus")
	defer end(&err)
	defer r.forgetProgress(p.Key.ConnectorName, p.Key.OwnerDID) // its version moves
	maxRetries, err := p.validate()
	if err != nil {
		return nil, fmt.Errorf("set sync status: %w", err)
	}
	key := p.Key.ConnectorName + "/" + p.Key.OwnerDID
	for attempt := 0; attempt <= maxRetries; attempt++ {
		if attempt > 0 {
			r.emit(ctx, EventCASRetry, 1, "")
		}
		var row models.SyncState
		err := r.primary(ctx).Scopes(scopes.Connector(p.Key.ConnectorName), scopes.Owner(p.Key.OwnerDID)).Take(&row).Error
		if err != nil {
			return nil, fmt.Errorf("set sync status %s: %w", key, notFound(err))
		}
		if len(p.IfStatus) > 0 && !slices.Contains(p.IfStatus, row.Status) {
			return nil, &StateError{Action: "set sync status", Key: key, State: row.Status, Want: p.IfStatus}
		}
		if row.Incarnation == nil {
			return nil, fmt.Errorf("set sync status %s: %w: the row has no incarnation", key, hooks.ErrMissingLock)
		}
		// Guarded on the status and error read too: SetSyncState (the
		// seed's upsert) rewrites them without bumping the version, and a
		// guard on the version alone would overwrite its status (and pass
		// IfStatus on a status no longer stored).
		tx := hooks.SkipLock(r.conn(ctx)).Model(&models.SyncState{}).
			Where(store.StatusUnchanged(p.Key.ConnectorName, p.Key.OwnerDID, row.Version, *row.Incarnation, row.Status, row.Error)).
			UpdateColumns(map[string]any{"status": p.Status, "error": p.Error, "version": row.Version + 1})
		if tx.Error != nil {
			return nil, fmt.Errorf("set sync status %s: %w", key, tx.Error)
		}
		if tx.RowsAffected == 1 {
			row.Status, row.Error, row.Version = p.Status, p.Error, row.Version+1
			return &row, nil
		}
	}
	r.emit(ctx, EventCASExhausted, 1, "")
	return nil, &RetriesExhaustedError{ConnectorName: p.Key.ConnectorName, OwnerDID: p.Key.OwnerDID,
		Attempts: maxRetries + 1, Action: "set sync status"}
}

func (p SetSyncStatusParams) validate() (int, error) {
	errs := []error{requireKeys("connector", p.Key.ConnectorName, "owner", p.Key.OwnerDID)}
	if !syncStatuses[p.Status] {
		errs = append(errs, invalid("status %q is not idle, syncing or error", p.Status))
	}
	for _, s := range p.IfStatus {
		if !syncStatuses[s] {
			errs = append(errs, invalid("expected status %q is not idle, syncing or error", s))
		}
	}
	if p.Error != nil {
		errs = append(errs, requireText("error", *p.Error))
	}
	maxRetries, err := maxRetriesOf(p.MaxRetries)
	return maxRetries, errors.Join(append(errs, err)...)
}
