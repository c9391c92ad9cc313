package repository

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
)

// CommitParams records a write that landed.
type CommitParams struct {
	Fence
	// DocumentID links the operation to the document the write created. It
	// may be nil when the operation was recorded with its document; when
	// both are set they must agree.
	DocumentID *string
	// ProviderEtag is the provider's version tag of the result, if any.
	ProviderEtag *string
	// ResultEntity is the provider's result as JSON, if any.
	ResultEntity models.JSON
}

// CommitOperation marks the operation committed with its result and ends
// the lease. The document id recorded with the operation is kept unless the
// commit supplies one; a different one is ErrInvalidInput. A retry with the
// same fence and the same result after a lost reply is a replay.
func (r *Repository) CommitOperation(ctx context.Context, p CommitParams) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "CommitOperation")
	defer end(&err)
	w, err := commitWrite(p)
	if err != nil {
		return nil, err
	}
	return r.fencedUpdate(ctx, w)
}

// Validate reports, as ErrInvalidInput, what CommitOperation(s) would
// refuse in p before writing anything: the same checks, shared. A document
// id other than the one the operation was recorded with is only known
// against the stored row; it is refused when the write meets it.
func (p CommitParams) Validate() error {
	w, err := commitWrite(p)
	if err != nil {
		return err
	}
	if err := w.validate(); err != nil {
		return fmt.Errorf("%s: %w", w.action, err)
	}
	return nil
}

// commitWrite is the fenced write of one commit.
func commitWrite(p CommitParams) (fencedWrite, error) {
	result, err := models.NewJSON(p.ResultEntity)
	if err != nil {
		return fencedWrite{}, fmt.Errorf("commit: %w: %w", ErrInvalidInput, err)
	}
	if p.DocumentID != nil {
		if err := requireKeys("document id", *p.DocumentID); err != nil {
			return fencedWrite{}, fmt.Errorf("commit: %w", err)
		}
	}
	w := fencedWrite{action: "commit", fence: p.Fence, ends: true, set: map[string]any{
		"state": models.OperationCommitted, "provider_etag": p.ProviderEtag,
		"result_entity": result, "next_attempt_at": nil,
	}, replayed: func(op *models.Operation) bool {
		return op.State == models.OperationCommitted && (p.DocumentID == nil || equalPtr(op.DocumentID, p.DocumentID)) &&
			equalPtr(op.ProviderEtag, p.ProviderEtag) && bytes.Equal(op.ResultEntity, result)
	}}
	if p.DocumentID != nil {
		w.set["document_id"] = *p.DocumentID
		w.guards = []guard{{col: "document_id", value: *p.DocumentID, orNull: true}}
		w.mismatch = func(op *models.Operation) error {
			if op.DocumentID == nil || *op.DocumentID == *p.DocumentID {
				return nil
			}
			return fmt.Errorf("commit %s: %w", p.Fence, invalid("operation is linked to document %s; the commit names %s",
				*op.DocumentID, *p.DocumentID))
		}
	}
	return w, nil
}

// MarkOperationDead ends the operation as dead (it needs a user's action).
// The recorded document id is kept, so retention still sees which document
// shows the failure.
func (r *Repository) MarkOperationDead(ctx context.Context, f Fence) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "MarkOperationDead")
	defer end(&err)
	return r.fencedUpdate(ctx, finishWrite(f, models.OperationDead))
}

// MarkOperationReconcileOnly ends re-drives; only reconciliation may touch
// the operation now. The recorded document id is kept.
func (r *Repository) MarkOperationReconcileOnly(ctx context.Context, f Fence) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "MarkOperationReconcileOnly")
	defer end(&err)
	return r.fencedUpdate(ctx, finishWrite(f, models.OperationReconcileOnly))
}

// finishActions name the write that ends an operation in each state, the
// same on the single and the batched path (refusals and events say it).
var finishActions = map[string]string{
	models.OperationDead:          "mark dead",
	models.OperationReconcileOnly: "mark reconcile-only",
}

// finishWrite is the fenced write that ends an operation in state.
func finishWrite(f Fence, state string) fencedWrite {
	return fencedWrite{action: finishActions[state], fence: f, ends: true,
		set:      map[string]any{"state": state, "next_attempt_at": nil},
		replayed: func(op *models.Operation) bool { return op.State == state }}
}

// FailureParams records a failed attempt.
type FailureParams struct {
	Fence
	// Kind classifies the failure (e.g. "timeout", "http"); required.
	Kind string
	// HTTPStatus is the provider's status code, if there was one.
	HTTPStatus *int64
	// NotBefore is the provider's own earliest retry time, if it gave one
	// (a Retry-After header): the next attempt is at the later of it and
	// the backoff's, so the backoff never brings a retry forward past what
	// the provider asked. It does not keep an operation the backoff
	// declares dead alive.
	NotBefore *time.Time
}

// RecordOperationFailure counts a failed attempt, stores its kind and
// status, and ends the lease. The backoff policy sets next_attempt_at, or
// declares the operation dead. The write is also guarded on the attempts
// count read, so two reports of one attempt cannot both count; a retry by
// the same fence with the same kind and status is a replay.
func (r *Repository) RecordOperationFailure(ctx context.Context, p FailureParams) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "RecordOperationFailure")
	defer end(&err)
	if err := validateFailure(p); err != nil {
		return nil, err
	}
	cur, err := r.getOperation(ctx, OperationKey{CallerDID: p.CallerDID, OperationID: p.OperationID})
	if err != nil {
		return nil, fmt.Errorf("record failure: %w", err)
	}
	return r.fencedUpdate(ctx, r.failureWrite(p, cur))
}

// Validate reports, as ErrInvalidInput, what RecordOperationFailure(s)
// would refuse in p before reading or writing anything; a worker checks a
// handler's result with it when the handler returns.
func (p FailureParams) Validate() error { return validateFailure(p) }

func validateFailure(p FailureParams) error {
	if p.Kind == "" {
		return fmt.Errorf("record failure: %w", invalid("failure kind is empty"))
	}
	if p.HTTPStatus != nil && (*p.HTTPStatus < 100 || *p.HTTPStatus > 599) {
		return fmt.Errorf("record failure: %w", invalid("HTTP status %d out of range", *p.HTTPStatus))
	}
	if p.NotBefore != nil {
		if err := requireTime("retry not-before time", *p.NotBefore); err != nil {
			return fmt.Errorf("record failure: %w", err)
		}
	}
	if err := errors.Join(p.Fence.validate(), requireText("failure", p)); err != nil {
		return fmt.Errorf("record failure: %w", err)
	}
	return nil
}

// failureWrite is the fenced write of one failure on the row cur as read:
// the backoff decides the next attempt, or that the operation is dead.
func (r *Repository) failureWrite(p FailureParams, cur *models.Operation) fencedWrite {
	attempts := cur.Attempts + 1
	set := map[string]any{"attempts": attempts, "last_kind": p.Kind, "last_http_status": p.HTTPStatus}
	if delay, dead := r.backoff.Next(attempts, p.Kind); dead {
		set["state"], set["next_attempt_at"] = models.OperationDead, nil
	} else {
		next := r.now().Add(delay)
		if p.NotBefore != nil && p.NotBefore.After(next) {
			next = *p.NotBefore
		}
		set["state"], set["next_attempt_at"] = models.OperationAttempted, next.UnixMilli()
	}
	return fencedWrite{action: "record failure", fence: p.Fence, ends: true, set: set,
		guards: []guard{{col: "attempts", value: cur.Attempts}},
		mismatch: func(op *models.Operation) error {
			if op.Attempts == cur.Attempts {
				return nil
			}
			return &LeaseLostError{Action: "record failure", Fence: p.Fence, State: op.State, Reason: LeaseLostAttemptsChanged}
		},
		replayed: func(op *models.Operation) bool {
			return (op.State == models.OperationAttempted || op.State == models.OperationDead) &&
				equalPtr(op.LastKind, &p.Kind) && equalPtr(op.LastHTTPStatus, p.HTTPStatus)
		}}
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
