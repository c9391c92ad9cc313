package repository

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrPendingAuthExpired is returned when a pending authorization is
// consumed after its expiry; it stays unconsumed, to be purged.
var ErrPendingAuthExpired = errors.New("connstore: pending authorization expired")

// ErrPendingAuthExists is returned when a state is saved twice: states are
// single-use nonces, so a second save is a bug or a replay.
var ErrPendingAuthExists = errors.New("connstore: pending authorization state already saved")

// PendingAuthInput is an OAuth (PKCE) authorization about to redirect the
// user to the provider.
type PendingAuthInput struct {
	// State is the OAuth state parameter, the record's key; required.
	State string
	// CodeVerifier is the PKCE code verifier; required, and never printed.
	CodeVerifier models.Secret
	// OwnerDID and ConnectorName bind the record: only a consume naming both
	// may take it.
	OwnerDID, ConnectorName string
	// RedirectURI is the absolute URI the provider returns to; required.
	RedirectURI string
	// Scopes are the requested scopes, stored as a JSON array.
	Scopes []string
	// ExpiresAt is when the record stops being consumable; after now.
	ExpiresAt time.Time
}

// SavePendingAuth records a pending authorization, created now.
func (r *Repository) SavePendingAuth(ctx context.Context, in PendingAuthInput) (_ *models.PendingAuth, err error) {
	ctx, end := r.start(ctx, "SavePendingAuth")
	defer end(&err)
	row, err := r.pendingAuthRow(in)
	if err == nil {
		err = r.inScope(ctx, in.OwnerDID, in.ConnectorName)
	}
	if err != nil {
		return nil, fmt.Errorf("save pending auth: %w", err)
	}
	tx := r.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(row)
	if tx.Error != nil {
		return nil, fmt.Errorf("save pending auth %s/%s: %w", in.OwnerDID, in.ConnectorName, tx.Error)
	}
	if tx.RowsAffected == 0 {
		return nil, fmt.Errorf("save pending auth %s/%s: %w", in.OwnerDID, in.ConnectorName, ErrPendingAuthExists)
	}
	return row, nil
}

func (r *Repository) pendingAuthRow(in PendingAuthInput) (*models.PendingAuth, error) {
	err := requireKeys("state", in.State, "code verifier", in.CodeVerifier.Reveal(), "owner", in.OwnerDID,
		"connector", in.ConnectorName, "redirect URI", in.RedirectURI)
	if err == nil {
		err = requireText("pending auth", in)
	}
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(in.RedirectURI); err != nil || !u.IsAbs() {
		return nil, invalid("redirect URI %q is not an absolute URI", in.RedirectURI)
	}
	now := r.nowMillis()
	if err := requireTime("expires at", in.ExpiresAt); err != nil {
		return nil, err
	}
	if in.ExpiresAt.UnixMilli() <= now {
		return nil, invalid("expires at %v is not after now", in.ExpiresAt)
	}
	granted, err := models.NewJSON(append([]string{}, in.Scopes...))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return &models.PendingAuth{State: in.State, CodeVerifier: in.CodeVerifier, OwnerDID: in.OwnerDID,
		ConnectorName: in.ConnectorName, RedirectURI: in.RedirectURI, Scopes: granted,
		CreatedAt: now, ExpiresAt: in.ExpiresAt.UnixMilli()}, nil
}

// ConsumeParams names the pending authorization a provider's callback
// returned, and whom it must belong to.
type ConsumeParams struct {
	State, OwnerDID, ConnectorName string
}

// ConsumePendingAuth takes a pending authorization once, in one statement:
// it marks the record consumed only while it is unconsumed, unexpired and
// bound to this owner and connector, and returns it. Of two concurrent
// consumers exactly one gets the record; the other, like a consume of an
// unknown, consumed or foreign state, gets ErrNotFound (which does not say
// which, so a probe learns nothing). An expired record is
// ErrPendingAuthExpired.
func (r *Repository) ConsumePendingAuth(ctx context.Context, p ConsumeParams) (_ *models.PendingAuth, err error) {
	ctx, end := r.start(ctx, "ConsumePendingAuth")
	defer end(&err)
	if err := requireKeys("state", p.State, "owner", p.OwnerDID, "connector", p.ConnectorName); err != nil {
		return nil, fmt.Errorf("consume pending auth: %w", err)
	}
	now := r.nowMillis()
	bound := func(db *gorm.DB) *gorm.DB {
		return db.Scopes(scopes.Eq("state", p.State), scopes.Owner(p.OwnerDID), scopes.Connector(p.ConnectorName),
			scopes.Eq("consumed_at", nil))
	}
	var rows []models.PendingAuth
	err = r.conn(ctx).Model(&rows).Clauses(clause.Returning{}).Scopes(bound).
		Where(clause.Gt{Column: clause.Column{Name: "expires_at"}, Value: now}).
		Update("consumed_at", now).Error
	if err != nil {
		return nil, fmt.Errorf("consume pending auth %s/%s: %w", p.OwnerDID, p.ConnectorName, err)
	}
	if len(rows) == 1 {
		return &rows[0], nil
	}
	// Not taken: tell an expired record from every other miss.
	var expired []int
	if err := r.primary(ctx).Model(&models.PendingAuth{}).Scopes(bound).Select("1").Limit(1).Find(&expired).Error; err != nil {
		return nil, fmt.Errorf("consume pending auth %s/%s: %w", p.OwnerDID, p.ConnectorName, err)
	}
	if len(expired) > 0 {
		return nil, fmt.Errorf("consume pending auth %s/%s: %w", p.OwnerDID, p.ConnectorName, ErrPendingAuthExpired)
	}
	return nil, fmt.Errorf("consume pending auth %s/%s: %w", p.OwnerDID, p.ConnectorName, ErrNotFound)
}

// PurgeParams bounds one purge of pending authorizations.
type PurgeParams struct {
	// Before is the cutoff: records that expired before it are deleted,
	// consumed or not (a consumed record is kept until its expiry, so a late
	// replay of its state is still told apart from a state never issued).
	Before time.Time
	// Limit is the most records one pass deletes; it must be positive.
	Limit int
}

// PurgePendingAuths deletes up to Limit records that expired before Before,
// oldest first through the expiry index, and returns how many; it fails
// closed on a bad cutoff or limit. Call it until it returns less than Limit.
func (r *Repository) PurgePendingAuths(ctx context.Context, p PurgeParams) (_ int64, err error) {
	ctx, end := r.start(ctx, "PurgePendingAuths")
	defer end(&err)
	if err := errors.Join(requireTime("before", p.Before), requireLimit(p.Limit)); err != nil {
		return 0, fmt.Errorf("purge pending auths: %w", err)
	}
	before := p.Before.UnixMilli()
	batch := r.conn(ctx).Model(&models.PendingAuth{}).Select("state").
		Where(clause.Lt{Column: clause.Column{Name: "expires_at"}, Value: before}).
		Order("expires_at").Limit(p.Limit)
	tx := r.conn(ctx).Where(store.StateIn(batch)).Delete(&models.PendingAuth{})
	if tx.Error != nil {
		return 0, fmt.Errorf("purge pending auths: %w", tx.Error)
	}
	return tx.RowsAffected, nil
}
