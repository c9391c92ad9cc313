package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ClaimParams selects and leases due operations.
type ClaimParams struct {
	// Limit is the most operations to lease; it must be positive.
	Limit int
	// LeaseFor is how long the lease lasts; it must be positive.
	LeaseFor time.Duration
	// ConnectorName and OwnerDID optionally narrow the claim.
	ConnectorName, OwnerDID string
}

// ClaimOperations leases up to Limit due attempted operations whose lease is
// free or expired, oldest next_attempt_at first (unscheduled ones after),
// under one fresh lease token
// (returned on every row). It is one UPDATE … WHERE key IN (SELECT … LIMIT n)
// RETURNING *: on Postgres the inner SELECT takes FOR UPDATE SKIP LOCKED, so
// concurrent claimers neither block on nor double-claim a row; on SQLite the
// single writer makes the statement atomic. Lease times follow the
// repository's LeaseClock.
func (r *Repository) ClaimOperations(ctx context.Context, p ClaimParams) (_ []models.Operation, err error) {
	ctx, end := r.start(ctx, "ClaimOperations")
	defer end(&err)
	if err := errors.Join(requireLimit(p.Limit), requireText("claim", p)); err != nil {
		return nil, fmt.Errorf("claim operations: %w", err)
	}
	if p.LeaseFor <= 0 {
		return nil, fmt.Errorf("claim operations: %w", invalid("lease duration %v must be positive", p.LeaseFor))
	}
	// A token the id source could not make unique (empty) would let every
	// claim's holder write as every other's: refused before anything moves.
	token := r.newID()
	if err := requireKeys("lease token from Options.NewIDFunc", token); err != nil {
		return nil, fmt.Errorf("claim operations: %w", err)
	}
	now := r.now()
	var rows []models.Operation
	// Bitmap scans off: with statistics that lag the queue (a due backlog
	// the last ANALYZE did not see), the planner expects a handful of due
	// rows and reads all of them through a bitmap and sorts them, on every
	// claim; the index read in order stops at the limit.
	claim := func(in *Repository) error {
		return in.conn(ctx).Model(&rows).Clauses(clause.Returning{}).
			Where("(caller_did, operation_id) IN (?)", in.dueToClaim(ctx, p, now)).
			Updates(map[string]any{
				"lease_token": token, "lease_expires_at": in.leaseUntil(p.LeaseFor),
				"updated_at": now.UnixMilli(),
			}).Error
	}
	if r.isPostgres() {
		err = r.withPlanSettings(ctx, []planSetting{{"enable_bitmapscan", "off"}},
			func(tx *gorm.DB) error { return claim(r.WithTx(tx)) })
	} else {
		err = claim(r) // one statement, atomic under SQLite's single writer
	}
	if err != nil {
		return nil, fmt.Errorf("claim operations: %w", err)
	}
	if len(rows) > 0 {
		r.emit(ctx, EventClaimed, int64(len(rows)), "")
	}
	slices.SortFunc(rows, func(a, b models.Operation) int {
		return cmp.Or(strings.Compare(a.CallerDID, b.CallerDID), strings.Compare(a.OperationID, b.OperationID))
	})
	return rows, nil
}

// dueToClaim selects the keys a claim leases: scheduled due rows, oldest
// first, then unscheduled ones (next_attempt_at NULL, due since recorded).
// Each kind is its own index range on (state, next_attempt_at), bounded by
// the limit: one predicate "NULL or at most now" let the planner read every
// due row through a bitmap and sort them, for each claim, so a backlog of
// 10k due rows cost 10k rows per claim of 80.
func (r *Repository) dueToClaim(ctx context.Context, p ClaimParams, now time.Time) *gorm.DB {
	next := clause.Column{Name: "next_attempt_at"}
	branch := func(due clause.Expression, ordered bool) *gorm.DB {
		q := r.conn(ctx).Model(&models.Operation{}).Select("caller_did", "operation_id", "next_attempt_at").
			Scopes(scopes.State(models.OperationAttempted), scopes.LeaseFreeAt(r.leaseNow())).Where(due).Limit(p.Limit)
		if ordered {
			q = q.Order("next_attempt_at")
		}
		if p.ConnectorName != "" {
			q = q.Scopes(scopes.Connector(p.ConnectorName))
		}
		if p.OwnerDID != "" {
			q = q.Scopes(scopes.Owner(p.OwnerDID))
		}
		if r.isPostgres() {
			q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked})
		}
		return q
	}
	scheduled := branch(clause.Lte{Column: next, Value: now.UnixMilli()}, true)
	unscheduled := branch(clause.Eq{Column: next, Value: nil}, false)
	return r.base(ctx).Table("(SELECT * FROM (?) AS s UNION ALL SELECT * FROM (?) AS u) AS due", scheduled, unscheduled).
		Select("caller_did", "operation_id").Order("next_attempt_at IS NULL, next_attempt_at").Limit(p.Limit)
}

// Fence names a leased operation and the token its holder was given. Every
// lease holder's write carries it, so a worker whose lease expired and was
// re-claimed cannot overwrite the new holder's work.
type Fence struct {
	CallerDID, OperationID, LeaseToken string
}

// FenceOf returns the fence for a claimed operation.
func FenceOf(op *models.Operation) Fence {
	f := Fence{CallerDID: op.CallerDID, OperationID: op.OperationID}
	if op.LeaseToken != nil {
		f.LeaseToken = *op.LeaseToken
	}
	return f
}

// String names the fenced operation as caller/operation.
func (f Fence) String() string { return f.CallerDID + "/" + f.OperationID }

func (f Fence) validate() error {
	return requireKeys("caller", f.CallerDID, "operation id", f.OperationID, "lease token", f.LeaseToken)
}

// HeartbeatOperation extends a held lease to now + extendFor. A lease that
// is no longer held is a *LeaseLostError; there is no replay, since
// extending a held lease again is harmless.
func (r *Repository) HeartbeatOperation(ctx context.Context, f Fence, extendFor time.Duration) (_ *models.Operation, err error) {
	ctx, end := r.start(ctx, "HeartbeatOperation")
	defer end(&err)
	if extendFor <= 0 {
		return nil, fmt.Errorf("heartbeat: %w", invalid("lease extension %v must be positive", extendFor))
	}
	w, err := r.fencedUpdate(ctx, r.heartbeatWrite(f, extendFor))
	if err != nil {
		return nil, err
	}
	return w.Operation, nil
}

// ReleaseOperation gives a held lease back; the operation stays attempted
// and due as before. A retry by the same fence after a lost reply is a
// replay.
func (r *Repository) ReleaseOperation(ctx context.Context, f Fence) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "ReleaseOperation")
	defer end(&err)
	return r.fencedUpdate(ctx, releaseWrite(f))
}

// heartbeatWrite extends a held lease to now + extendFor.
func (r *Repository) heartbeatWrite(f Fence, extendFor time.Duration) fencedWrite {
	return fencedWrite{action: "heartbeat", fence: f, set: map[string]any{"lease_expires_at": r.leaseUntil(extendFor)}}
}

// releaseWrite gives a held lease back.
func releaseWrite(f Fence) fencedWrite {
	return fencedWrite{action: "release", fence: f, ends: true, set: map[string]any{},
		replayed: func(op *models.Operation) bool { return op.State == models.OperationAttempted }}
}
