package repository

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
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
// free or expired, oldest next_attempt_at first, under one fresh lease token
// (returned on every row). It is one UPDATE … WHERE key IN (SELECT … LIMIT n)
// RETURNING *: on Postgres the inner SELECT takes FOR UPDATE SKIP LOCKED, so
// concurrent claimers neither block on nor double-claim a row; on SQLite the
// single writer makes the statement atomic.
func (r *Repository) ClaimOperations(ctx context.Context, p ClaimParams) ([]models.Operation, error) {
	if err := requireLimit(p.Limit); err != nil {
		return nil, fmt.Errorf("claim operations: %w", err)
	}
	if p.LeaseFor <= 0 {
		return nil, fmt.Errorf("claim operations: %w", invalid("lease duration %v must be positive", p.LeaseFor))
	}
	now := r.now()
	due := r.conn(ctx).Model(&models.Operation{}).Select("caller_did", "operation_id").
		Scopes(scopes.State(models.OperationAttempted), scopes.Due(now), scopes.LeaseFree(now)).
		Order("next_attempt_at").Limit(p.Limit)
	if p.ConnectorName != "" {
		due = due.Scopes(scopes.Connector(p.ConnectorName))
	}
	if p.OwnerDID != "" {
		due = due.Scopes(scopes.Owner(p.OwnerDID))
	}
	if r.isPostgres() {
		due = due.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked})
	}
	var rows []models.Operation
	err := r.conn(ctx).Model(&rows).Clauses(clause.Returning{}).
		Where("(caller_did, operation_id) IN (?)", due).
		Updates(map[string]any{
			"lease_token": r.newID(), "lease_expires_at": now.Add(p.LeaseFor).UnixMilli(),
			"updated_at": now.UnixMilli(),
		}).Error
	if err != nil {
		return nil, fmt.Errorf("claim operations: %w", err)
	}
	slices.SortFunc(rows, func(a, b models.Operation) int {
		return cmp.Or(strings.Compare(a.CallerDID, b.CallerDID), strings.Compare(a.OperationID, b.OperationID))
	})
	return rows, nil
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

func (f Fence) validate() error {
	return requireKeys("caller", f.CallerDID, "operation id", f.OperationID, "lease token", f.LeaseToken)
}

// released clears the lease; merged into every write that ends an attempt.
func released(set map[string]any) map[string]any {
	set["lease_token"] = nil
	set["lease_expires_at"] = nil
	return set
}

// fencedUpdate applies set to the operation only while it is attempted and
// still leased under the fence's token at the clock's now; otherwise
// ErrLeaseLost (or ErrNotFound) and nothing changes. extra narrows further.
func (r *Repository) fencedUpdate(ctx context.Context, action string, f Fence, set map[string]any, extra ...scopes.Scope) (*models.Operation, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	now := r.now()
	set["updated_at"] = now.UnixMilli()
	var rows []models.Operation
	err := r.conn(ctx).Model(&rows).Clauses(clause.Returning{}).
		Scopes(scopes.Caller(f.CallerDID), scopes.Eq("operation_id", f.OperationID),
			scopes.State(models.OperationAttempted), scopes.LeaseHeld(f.LeaseToken, now)).
		Scopes(extra...).Updates(set).Error
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", action, f.CallerDID, f.OperationID, err)
	}
	if len(rows) == 1 {
		return &rows[0], nil
	}
	if _, err := r.GetOperation(ctx, f.CallerDID, f.OperationID); err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	return nil, fmt.Errorf("%s %s/%s: %w", action, f.CallerDID, f.OperationID, ErrLeaseLost)
}

// HeartbeatOperation extends a held lease to now + extendFor.
func (r *Repository) HeartbeatOperation(ctx context.Context, f Fence, extendFor time.Duration) (*models.Operation, error) {
	if extendFor <= 0 {
		return nil, fmt.Errorf("heartbeat: %w", invalid("lease extension %v must be positive", extendFor))
	}
	return r.fencedUpdate(ctx, "heartbeat", f, map[string]any{
		"lease_expires_at": r.now().Add(extendFor).UnixMilli(),
	})
}

// ReleaseOperation gives a held lease back; the operation stays attempted
// and due as before.
func (r *Repository) ReleaseOperation(ctx context.Context, f Fence) (*models.Operation, error) {
	return r.fencedUpdate(ctx, "release", f, released(map[string]any{}))
}

// CommitParams records a write that landed.
type CommitParams struct {
	Fence
	// DocumentID is the document the write produced, if any.
	DocumentID *string
	// ProviderEtag is the provider's version tag of the result, if any.
	ProviderEtag *string
	// ResultEntity is the provider's result as JSON, if any.
	ResultEntity models.JSON
}

// CommitOperation marks the operation committed with its result and ends
// the lease.
func (r *Repository) CommitOperation(ctx context.Context, p CommitParams) (*models.Operation, error) {
	if err := requireJSON(p.ResultEntity); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return r.fencedUpdate(ctx, "commit", p.Fence, released(map[string]any{
		"state": models.OperationCommitted, "document_id": p.DocumentID, "provider_etag": p.ProviderEtag,
		"result_entity": p.ResultEntity, "next_attempt_at": nil,
	}))
}

// MarkOperationDead ends the operation as dead (it needs a user's action).
func (r *Repository) MarkOperationDead(ctx context.Context, f Fence) (*models.Operation, error) {
	return r.finish(ctx, "mark dead", f, models.OperationDead)
}

// MarkOperationReconcileOnly ends re-drives; only reconciliation may touch
// the operation now.
func (r *Repository) MarkOperationReconcileOnly(ctx context.Context, f Fence) (*models.Operation, error) {
	return r.finish(ctx, "mark reconcile-only", f, models.OperationReconcileOnly)
}

func (r *Repository) finish(ctx context.Context, action string, f Fence, state string) (*models.Operation, error) {
	return r.fencedUpdate(ctx, action, f, released(map[string]any{"state": state, "next_attempt_at": nil}))
}

// FailureParams records a failed attempt.
type FailureParams struct {
	Fence
	// Kind classifies the failure (e.g. "timeout", "http"); required.
	Kind string
	// HTTPStatus is the provider's status code, if there was one.
	HTTPStatus *int64
}

// RecordOperationFailure counts a failed attempt, stores its kind and
// status, and ends the lease. The backoff policy sets next_attempt_at, or
// declares the operation dead. The write is also guarded on the attempts
// count read, so two reports of one attempt cannot both count.
func (r *Repository) RecordOperationFailure(ctx context.Context, p FailureParams) (*models.Operation, error) {
	if p.Kind == "" {
		return nil, fmt.Errorf("record failure: %w", invalid("failure kind is empty"))
	}
	if p.HTTPStatus != nil && (*p.HTTPStatus < 100 || *p.HTTPStatus > 599) {
		return nil, fmt.Errorf("record failure: %w", invalid("HTTP status %d out of range", *p.HTTPStatus))
	}
	if err := p.Fence.validate(); err != nil {
		return nil, fmt.Errorf("record failure: %w", err)
	}
	cur, err := r.GetOperation(ctx, p.CallerDID, p.OperationID)
	if err != nil {
		return nil, fmt.Errorf("record failure: %w", err)
	}
	attempts := cur.Attempts + 1
	set := released(map[string]any{"attempts": attempts, "last_kind": p.Kind, "last_http_status": p.HTTPStatus})
	if delay, dead := r.backoff.Next(attempts, p.Kind); dead {
		set["state"], set["next_attempt_at"] = models.OperationDead, nil
	} else {
		set["next_attempt_at"] = r.now().Add(delay).UnixMilli()
	}
	return r.fencedUpdate(ctx, "record failure", p.Fence, set, scopes.Eq("attempts", cur.Attempts))
}
