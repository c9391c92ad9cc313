package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/fence"
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
	if err := validateWrite(w); err != nil {
		return fmt.Errorf("%s: %w", w.Action, err)
	}
	return nil
}

// commitWrite is the fenced write of one commit.
func commitWrite(p CommitParams) (fence.Write, error) {
	result, err := models.NewJSON(p.ResultEntity)
	if err != nil {
		return fence.Write{}, fmt.Errorf("commit: %w: %w", ErrInvalidInput, err)
	}
	if p.DocumentID != nil {
		if err := requireKeys("document id", *p.DocumentID); err != nil {
			return fence.Write{}, fmt.Errorf("commit: %w", err)
		}
	}
	return fence.Commit(fence.Target(p.Fence), p.DocumentID, p.ProviderEtag, result), nil
}

// MarkOperationDead ends the operation as dead (it needs a user's action)
// with no cause given: the last answer is cleared (it was an earlier
// attempt's), and the end is added to the attempt history. To record why,
// use FinishOperationsWith. The recorded document id is kept, so retention
// still sees which document shows the failure.
func (r *Repository) MarkOperationDead(ctx context.Context, f Fence) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "MarkOperationDead")
	defer end(&err)
	return r.fencedUpdate(ctx, fence.Finish(fence.Target(f), models.OperationDead, fence.Answer{At: r.nowMillis()}))
}

// MarkOperationReconcileOnly ends re-drives; only reconciliation may touch
// the operation now. As MarkOperationDead, it clears the last answer. The
// recorded document id is kept.
func (r *Repository) MarkOperationReconcileOnly(ctx context.Context, f Fence) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "MarkOperationReconcileOnly")
	defer end(&err)
	return r.fencedUpdate(ctx, fence.Finish(fence.Target(f), models.OperationReconcileOnly, fence.Answer{At: r.nowMillis()}))
}

// FinishParams ends a leased operation (dead or reconcile_only) with the
// attempt's own cause: what triage shows for it, and what its attempt
// history keeps. Every field but the fence may be empty (no cause given).
type FinishParams struct {
	Fence
	// Kind classifies the cause (e.g. "validation", "http").
	Kind string
	// HTTPStatus is the provider's status code, if there was one (100–599).
	HTTPStatus *int64
	// Message is a short text for an operator, stored as fence.Message
	// makes it: control characters and runs of white space made one
	// space, cut to 500 bytes.
	Message string
}

// Validate reports, as ErrInvalidInput, what FinishOperationsWith would
// refuse in p before writing anything.
func (p FinishParams) Validate() error {
	p.Message = fence.Message(p.Message)
	if err := errors.Join(p.Fence.validate(), requireStatus(p.HTTPStatus), requireText("finish", p)); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

func (r *Repository) finishWrite(p FinishParams, state string) fence.Write {
	return fence.Finish(fence.Target(p.Fence), state,
		fence.Answer{Kind: p.Kind, HTTPStatus: p.HTTPStatus, Message: p.Message, At: r.nowMillis()})
}

// requireStatus refuses an HTTP status outside 100–599.
func requireStatus(status *int64) error {
	if status != nil && (*status < 100 || *status > 599) {
		return invalid("HTTP status %d is not 100–599", *status)
	}
	return nil
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
	// Message is a short text for an operator (the provider's error, a
	// hint), stored as FinishParams.Message is.
	Message string
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
	if err := requireStatus(p.HTTPStatus); err != nil {
		return fmt.Errorf("record failure: %w", err)
	}
	if p.NotBefore != nil {
		if err := requireTime("retry not-before time", *p.NotBefore); err != nil {
			return fmt.Errorf("record failure: %w", err)
		}
	}
	p.Message = fence.Message(p.Message) // stored as cleaned, so checked as cleaned
	if err := errors.Join(p.Fence.validate(), requireText("failure", p)); err != nil {
		return fmt.Errorf("record failure: %w", err)
	}
	return nil
}

// failureWrite is the fenced write of one failure on the row cur as read:
// the backoff decides the next attempt, or that the operation is dead; a
// provider's not-before time is never brought forward.
func (r *Repository) failureWrite(p FailureParams, cur *models.Operation) fence.Write {
	var next *int64
	if delay, dead := r.backoff.Next(cur.Attempts+1, p.Kind); !dead {
		at := r.now().Add(delay)
		if p.NotBefore != nil && p.NotBefore.After(at) {
			at = *p.NotBefore
		}
		ms := at.UnixMilli()
		next = &ms
	}
	return fence.Failure(fence.Target(p.Fence), cur.Attempts,
		fence.Answer{Kind: p.Kind, HTTPStatus: p.HTTPStatus, Message: p.Message, At: r.nowMillis()}, next)
}
