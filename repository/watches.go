package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// WatchKey identifies a projection watch.
type WatchKey struct {
	OwnerDID, ConnectorName, Model, AccountKey, SourceID string
}

// String names the watch as owner/connector/model/account/source.
func (k WatchKey) String() string {
	return k.OwnerDID + "/" + k.ConnectorName + "/" + k.Model + "/" + k.AccountKey + "/" + k.SourceID
}

func (k WatchKey) validate() error {
	return requireKeys("owner", k.OwnerDID, "connector", k.ConnectorName, "model", k.Model,
		"account key", k.AccountKey, "source id", k.SourceID)
}

func (k WatchKey) scope(db *gorm.DB) *gorm.DB {
	return db.Scopes(scopes.Owner(k.OwnerDID), scopes.Connector(k.ConnectorName),
		scopes.Eq("model", k.Model), scopes.Eq("account_key", k.AccountKey), scopes.Eq("source_id", k.SourceID))
}

// KeyOf returns the identity of w.
func KeyOf(w *models.ProjectionWatch) WatchKey {
	return WatchKey{w.OwnerDID, w.ConnectorName, w.Model, w.AccountKey, w.SourceID}
}

// ArmWatchParams (re-)arms a watch on a written document.
type ArmWatchParams struct {
	WatchKey
	// DocumentID is the document whose projection is verified; required.
	DocumentID string
	// VerifyAt is when to verify; the zero time means now.
	VerifyAt time.Time
}

// ArmWatch creates the watch as pending_verification due at VerifyAt, or
// re-arms an existing one: new document id, pending again with its attempt
// count reset, version bumped. The digest watermarks are kept, so the audit
// sweep still compares against what was last verified and observed.
func (r *Repository) ArmWatch(ctx context.Context, p ArmWatchParams) (_ *models.ProjectionWatch, err error) {
	ctx, end := r.start(ctx, "ArmWatch")
	defer end(&err)
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("arm watch: %w", err)
	}
	if err := requireKeys("document id", p.DocumentID); err != nil {
		return nil, fmt.Errorf("arm watch: %w", err)
	}
	if err := r.inScope(ctx, p.OwnerDID, p.ConnectorName); err != nil {
		return nil, fmt.Errorf("arm watch: %w", err)
	}
	now := r.nowMillis()
	at := now
	if !p.VerifyAt.IsZero() {
		if err := requireTime("verify at", p.VerifyAt); err != nil {
			return nil, fmt.Errorf("arm watch: %w", err)
		}
		at = p.VerifyAt.UnixMilli()
	}
	row := &models.ProjectionWatch{
		OwnerDID: p.OwnerDID, ConnectorName: p.ConnectorName, Model: p.Model, AccountKey: p.AccountKey,
		SourceID: p.SourceID, DocumentID: p.DocumentID, VerificationStatus: models.WatchPendingVerification,
		NextAttemptAt: &at, CreatedAt: now, UpdatedAt: now,
	}
	err = r.conn(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "owner_did"}, {Name: "connector_name"}, {Name: "model"},
			{Name: "account_key"}, {Name: "source_id"}},
		DoUpdates: clause.Assignments(map[string]any{
			"document_id": p.DocumentID, "verification_status": models.WatchPendingVerification,
			"verification_attempts": 0, "next_attempt_at": at, "updated_at": now,
			"version": store.Increment(models.ProjectionWatch{}.TableName(), "version"),
		}),
	}).Create(row).Error
	if err != nil {
		return nil, fmt.Errorf("arm watch: %w", err)
	}
	return r.getWatch(ctx, p.WatchKey)
}

// GetWatch returns one watch, or ErrNotFound.
func (r *Repository) GetWatch(ctx context.Context, k WatchKey) (_ *models.ProjectionWatch, err error) {
	ctx, end := r.start(ctx, "GetWatch")
	defer end(&err)
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("get watch: %w", err)
	}
	return r.getWatch(ctx, k)
}

// getWatch reads one watch on the primary, for GetWatch and for the calls
// that return the row they wrote (without a nested GetWatch span).
func (r *Repository) getWatch(ctx context.Context, k WatchKey) (*models.ProjectionWatch, error) {
	return takeOne[models.ProjectionWatch](ctx, r, "watch", k, k.scope)
}

// VerificationParams records the outcome of verifying a watch.
type VerificationParams struct {
	// Watch is the watch as read; the write is guarded on its version.
	Watch *models.ProjectionWatch
	// Outcome is models.WatchVerified, WatchPendingVerification or
	// WatchRepairFailed.
	Outcome string
	// VerifiedDigest is the digest found correct; required when verified.
	VerifiedDigest *string
	// ObservedWinnerDigest is the winner seen; required for repair_failed,
	// where it bounds re-audits to a winner that actually moved.
	ObservedWinnerDigest *string
	// NextAttemptAt schedules the next look; required when pending.
	NextAttemptAt time.Time
	// Repaired is set when a repair write was issued this round.
	Repaired bool
}

// RecordVerification stores a verification outcome by compare-and-swap on
// the version read. verified clears the schedule and attempt count;
// pending counts an attempt and reschedules; repair_failed counts an
// attempt and clears the schedule, so only a moved winner (the audit sweep)
// reopens it. Repaired bumps repair_generation. A stale read is ErrConflict.
func (r *Repository) RecordVerification(ctx context.Context, p VerificationParams) (_ *models.ProjectionWatch, err error) {
	ctx, end := r.start(ctx, "RecordVerification")
	defer end(&err)
	set, err := verificationSet(p)
	if err != nil {
		return nil, fmt.Errorf("record verification: %w", err)
	}
	set["updated_at"] = r.nowMillis()
	if err := r.conn(ctx).Model(p.Watch).Updates(set).Error; err != nil {
		return nil, fmt.Errorf("record verification %s: %w", KeyOf(p.Watch), err)
	}
	return r.getWatch(ctx, KeyOf(p.Watch))
}

func verificationSet(p VerificationParams) (map[string]any, error) {
	if p.Watch == nil {
		return nil, invalid("watch is nil")
	}
	if err := errors.Join(KeyOf(p.Watch).validate(), requireText("verification", p)); err != nil {
		return nil, err
	}
	set := map[string]any{"verification_status": p.Outcome}
	if p.ObservedWinnerDigest != nil {
		set["observed_winner_digest"] = *p.ObservedWinnerDigest
	}
	if p.Repaired {
		set["repair_generation"] = store.Increment("", "repair_generation")
	}
	switch p.Outcome {
	case models.WatchVerified:
		if p.VerifiedDigest == nil || *p.VerifiedDigest == "" {
			return nil, invalid("verified outcome needs a digest")
		}
		set["verified_state_digest"], set["verification_attempts"], set["next_attempt_at"] = *p.VerifiedDigest, 0, nil
	case models.WatchPendingVerification:
		if err := requireTime("next attempt at", p.NextAttemptAt); err != nil {
			return nil, err
		}
		set["verification_attempts"], set["next_attempt_at"] = store.Increment("", "verification_attempts"), p.NextAttemptAt.UnixMilli()
	case models.WatchRepairFailed:
		if p.ObservedWinnerDigest == nil || *p.ObservedWinnerDigest == "" {
			return nil, invalid("repair_failed outcome needs the observed winner digest")
		}
		set["verification_attempts"], set["next_attempt_at"] = store.Increment("", "verification_attempts"), nil
	default:
		return nil, invalid("unknown verification outcome %q", p.Outcome)
	}
	return set, nil
}
