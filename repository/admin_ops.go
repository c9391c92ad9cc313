package repository

import (
	"context"
	"fmt"
	"slices"

	"github.com/connstore/connstore/internal/fence"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm/clause"
)

// CancelledKind is the last_kind CancelOperation stores on the operation it
// marks dead, so a listing tells an operator's cancel apart from a failure
// the worker gave up on.
const CancelledKind = "cancelled"

// OperationKey names one operation.
type OperationKey struct {
	// CallerDID is the DID that recorded the operation (the journal's
	// partition of keys), e.g. "did:key:z6Mk…".
	CallerDID string
	// OperationID is the caller's id of the operation.
	OperationID string
}

// String renders the key as caller/operation, the form errors use.
func (k OperationKey) String() string { return k.CallerDID + "/" + k.OperationID }

func (k OperationKey) validate() error {
	return requireKeys("caller", k.CallerDID, "operation id", k.OperationID)
}

// RequeueParams asks for a dead or reconcile-only operation to be driven
// again.
type RequeueParams struct {
	OperationKey
	// ResetAttempts starts the attempt count again at zero, so the worker's
	// MaxAttempts budget applies afresh (the usual choice once the cause is
	// fixed). When false the count is kept and the next failure past the
	// budget marks the operation dead again at once.
	ResetAttempts bool
}

// RequeueOperation is the user's action the seed leaves dead and
// reconcile-only operations waiting for: the operation goes back to
// attempted, due now, with no lease, so the next claim picks it up. The
// last answer (last_kind, last_http_status, last_message) is cleared: the
// next attempt's answer is its own, so triage never shows an earlier
// attempt's cause for a later death; the attempt history
// (OperationAttempts) keeps every answer. The rest stays in the row: the
// provider etag and result, the document link, and (unless ResetAttempts)
// the attempt count. An attempted row is not the retention pass's to judge: it leaves
// the rows a pass judges (a trigger), held or not, and enters them again
// when it finishes. Any other state is a *StateError
// (ErrWrongState); a missing row (or one outside the repository's scopes) is
// ErrNotFound. It returns the stored row.
func (r *Repository) RequeueOperation(ctx context.Context, p RequeueParams) (_ *models.Operation, err error) {
	ctx, end := r.start(ctx, "RequeueOperation")
	defer end(&err)
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("requeue operation: %w", err)
	}
	set := r.requeueSet(p.ResetAttempts)
	return r.operatorWrite(ctx, "requeue", p.OperationKey,
		[]string{models.OperationDead, models.OperationReconcileOnly}, nil, set)
}

// requeueSet is what a requeue writes: attempted, due now, no lease, no
// last answer; attempts zero with reset.
func (r *Repository) requeueSet(reset bool) map[string]any {
	set := map[string]any{
		"state": models.OperationAttempted, "next_attempt_at": r.nowMillis(), "updated_at": r.nowMillis(),
		"lease_token": nil, "lease_expires_at": nil,
	}
	if reset {
		set["attempts"] = 0
	}
	fence.ClearAnswer(set)
	return set
}

// cancelSet is what a cancel writes: dead with the cancel as its answer,
// no lease.
func (r *Repository) cancelSet() map[string]any {
	// ended_lease_token is "", not the holder's token: a holder's retry
	// must never read the cancel as a replay of its own write, and no lease
	// token is empty. Not NULL either: the operation was ended, so its next
	// claim (after a requeue) is not its first (worker.Finished).
	set := map[string]any{
		"state": models.OperationDead, "next_attempt_at": nil,
		"lease_token": nil, "lease_expires_at": nil, "ended_lease_token": "", "updated_at": r.nowMillis(),
	}
	fence.AnswerOf(CancelledKind, r.nowMillis()).Set(set)
	return set
}

// CancelParams asks for an attempted operation to be given up.
type CancelParams struct {
	OperationKey
	// Force cancels even while a worker holds the operation under a live
	// lease. The holder's later writes (commit, failure, heartbeat) are then
	// refused with a *LeaseLostError: the fence sees a finished operation.
	// Its outbound call may still land at the provider; only the journal
	// forgets it.
	Force bool
}

// CancelOperation gives up an attempted operation: it is marked dead with
// last_kind "cancelled" (CancelledKind, its answer: the status and message
// of an earlier attempt are cleared, and the cancel enters the attempt
// history) and its lease is ended, so no claim
// picks it up again; RequeueOperation brings it back. Without Force an
// operation under a live lease is refused with ErrLeaseHeld (the holder may
// be writing to the provider right now). Exactly one of a cancel and the
// holder's own finishing write wins: the other is refused (ErrWrongState
// for the cancel, ErrLeaseLost for the holder). A finished operation is a
// *StateError; a missing one ErrNotFound. It returns the stored row.
func (r *Repository) CancelOperation(ctx context.Context, p CancelParams) (_ *models.Operation, err error) {
	ctx, end := r.start(ctx, "CancelOperation")
	defer end(&err)
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("cancel operation: %w", err)
	}
	var guard scopes.Scope
	if !p.Force {
		guard = scopes.LeaseFreeAt(r.leaseNow())
	}
	return r.operatorWrite(ctx, "cancel", p.OperationKey, []string{models.OperationAttempted}, guard, r.cancelSet())
}

// operatorWrite applies set to the operation when its state is one of from
// (and guard, if any, holds), in one conditional UPDATE … RETURNING, so a
// racing worker's write and this one cannot both land. A refused write is
// explained from the row read after it; when that row shows an allowed
// state again (another writer moved it back in between), the write is
// tried again, a bounded number of times.
func (r *Repository) operatorWrite(ctx context.Context, action string, k OperationKey, from []string,
	guard scopes.Scope, set map[string]any) (*models.Operation, error) {
	const attempts = 3
	for range attempts {
		var rows []models.Operation
		q := r.scanOps(r.conn(ctx), &rows).Clauses(clause.Returning{}).
			Scopes(scopes.Caller(k.CallerDID), scopes.Eq("operation_id", k.OperationID), scopes.State(from...))
		if guard != nil {
			q = q.Scopes(guard)
		}
		if err := q.Updates(set).Error; err != nil {
			return nil, fmt.Errorf("%s operation %s: %w", action, k, err)
		}
		if len(rows) == 1 {
			// A requeue brings its account work; a forced cancel frees a slot.
			if err := r.wakeFlow(ctx, []*models.Operation{&rows[0]}, nil); err != nil {
				r.log.WarnContext(ctx, "connstore: waking the account after "+action+" failed", "err", err)
			}
			return &rows[0], nil
		}
		op, err := r.getOperation(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", action, err)
		}
		if !slices.Contains(from, op.State) {
			return nil, &StateError{Action: action + " operation", Key: k.String(), State: op.State, Want: from}
		}
		if guard != nil && op.LeaseToken != nil {
			return nil, fmt.Errorf("%s operation %s: %w by token %s until %d (pass Force to cancel anyway)",
				action, k, ErrLeaseHeld, *op.LeaseToken, derefInt(op.LeaseExpiresAt))
		}
	}
	return nil, fmt.Errorf("%s operation %s: %w: its state changed under %d attempts", action, k, ErrRetriesExhausted, attempts)
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
