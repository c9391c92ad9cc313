package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// syncStatuses are the workflow states a sync-state row may hold.
var syncStatuses = map[string]bool{
	models.SyncStatusIdle: true, models.SyncStatusSyncing: true, models.SyncStatusError: true,
}

// SyncStateInput is the state SetSyncState writes.
type SyncStateInput struct {
	// Checkpoint is the connector's resume point; nil is NULL.
	Checkpoint models.JSON
	// LastSyncedAt is the last sync time as the connector formats it.
	LastSyncedAt string
	// EntityCount is the number of entities synced; never negative.
	EntityCount int64
	// Status is one of the models.SyncStatus* values.
	Status string
	// Error is the last error message, or nil.
	Error *string
	// Recovery is the durable recovery buffer; nil means empty.
	Recovery models.JSON
}

// ConnectorKey names one connector of one owner: the key of a sync state,
// and of the receipts ListSweepReceipts lists. Like every composite key of
// the API it is a struct, owner first.
type ConnectorKey struct {
	// OwnerDID is the owner's DID, e.g. "did:key:z6MkOwner".
	OwnerDID string
	// ConnectorName names the connector, e.g. "hubspot".
	ConnectorName string
}

// String names the key as owner/connector.
func (k ConnectorKey) String() string { return k.OwnerDID + "/" + k.ConnectorName }

func (k ConnectorKey) validate() error {
	return requireKeys("owner", k.OwnerDID, "connector", k.ConnectorName)
}

// GetSyncState returns the row for k, or ErrNotFound.
func (r *Repository) GetSyncState(ctx context.Context, k ConnectorKey) (_ *models.SyncState, err error) {
	ctx, end := r.start(ctx, "GetSyncState")
	defer end(&err)
	connector, owner := k.ConnectorName, k.OwnerDID
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("get sync state: %w", err)
	}
	return takeOne[models.SyncState](ctx, r, "sync state", connector+"/"+owner, func(db *gorm.DB) *gorm.DB {
		return db.Scopes(scopes.Connector(connector), scopes.Owner(owner))
	})
}

// SetSyncState upserts the row. A fresh insert seeds version 0 and a random
// incarnation (via the hooks plugin) with lease_expires_at NULL; a
// conflicting update leaves version, incarnation and lease_expires_at
// untouched. This is not the CAS write: it neither checks nor bumps version.
func (r *Repository) SetSyncState(ctx context.Context, k ConnectorKey, in SyncStateInput) (err error) {
	ctx, end := r.start(ctx, "SetSyncState")
	defer end(&err)
	connector, owner := k.ConnectorName, k.OwnerDID
	defer r.forgetProgress(connector, owner) // its documents change (not its version): the next CAS would only miss
	if err := validateSyncStateInput(connector, owner, in); err != nil {
		return fmt.Errorf("set sync state: %w", err)
	}
	if err := r.inScope(ctx, owner, connector); err != nil {
		return fmt.Errorf("set sync state: %w", err)
	}
	row := models.SyncState{
		ConnectorName: connector, OwnerDID: owner,
		Checkpoint: in.Checkpoint, LastSyncedAt: in.LastSyncedAt, EntityCount: in.EntityCount,
		Status: in.Status, Error: in.Error, Recovery: in.Recovery,
	}
	// The conflict update is deliberately not a CAS write: the plugin must
	// neither bump the version nor touch the incarnation.
	err = hooks.KeepLockOnConflict(r.conn(ctx)).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "connector_name"}, {Name: "owner_did"}},
		DoUpdates: clause.AssignmentColumns([]string{
			"checkpoint", "last_synced_at", "entity_count", "status", "error", "recovery",
		}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("set sync state %s/%s: %w", connector, owner, err)
	}
	return nil
}

// DeleteSyncState deletes the row; deleting a missing row is not an error.
func (r *Repository) DeleteSyncState(ctx context.Context, k ConnectorKey) (err error) {
	ctx, end := r.start(ctx, "DeleteSyncState")
	defer end(&err)
	connector, owner := k.ConnectorName, k.OwnerDID
	defer r.forgetProgress(connector, owner)
	if err := k.validate(); err != nil {
		return fmt.Errorf("delete sync state: %w", err)
	}
	err = r.conn(ctx).Scopes(scopes.Connector(connector), scopes.Owner(owner)).
		Delete(&models.SyncState{}).Error
	if err != nil {
		return fmt.Errorf("delete sync state %s/%s: %w", connector, owner, err)
	}
	return nil
}

// ListSyncStatesParams pages through one connector's rows by owner DID.
type ListSyncStatesParams struct {
	// ConnectorName is the connector whose rows are listed.
	ConnectorName string
	// AfterOwnerDID resumes after this owner; "" starts at the beginning.
	AfterOwnerDID string
	// Limit is the page size; it must be positive.
	Limit int
}

// ListSyncStates returns up to Limit rows of a connector ordered by owner
// DID, starting after AfterOwnerDID. A short page is the last one.
func (r *Repository) ListSyncStates(ctx context.Context, p ListSyncStatesParams) (_ []models.SyncState, err error) {
	ctx, end := r.start(ctx, "ListSyncStates")
	defer end(&err)
	if err := requireKeys("connector", p.ConnectorName); err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	if err := requireLimit(p.Limit); err != nil {
		return nil, fmt.Errorf("list sync states: %w", err)
	}
	q := r.conn(ctx).Scopes(scopes.Connector(p.ConnectorName))
	if p.AfterOwnerDID != "" {
		q = q.Where(store.OwnerAfter(p.AfterOwnerDID))
	}
	var rows []models.SyncState
	if err := q.Order("owner_did").Limit(p.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sync states of %s: %w", p.ConnectorName, err)
	}
	return rows, nil
}

func validateSyncStateInput(connector, owner string, in SyncStateInput) error {
	if err := requireKeys("connector", connector, "owner", owner); err != nil {
		return err
	}
	if err := requireText("sync state", in); err != nil {
		return err
	}
	if !syncStatuses[in.Status] {
		return invalid("unknown sync status %q", in.Status)
	}
	return validateProgress(in.LastSyncedAt, in.EntityCount, in.Checkpoint, in.Recovery)
}

func validateProgress(lastSyncedAt string, entityCount int64, docs ...models.JSON) error {
	if lastSyncedAt == "" {
		return invalid("last synced at is empty")
	}
	if entityCount < 0 {
		return invalid("entity count %d is negative", entityCount)
	}
	return requireJSON(docs...)
}
