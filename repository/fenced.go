package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/connstore/connstore/models"
)

// FencedWrite is what a lease holder's write left stored.
type FencedWrite struct {
	// Operation is the stored row after the write; its fields are promoted.
	*models.Operation
	// Replay is true when this fence had already made this write (a retry
	// after a lost reply): the stored row is returned and nothing is written.
	Replay bool
}

// fencedWrite is one lease holder's write.
type fencedWrite struct {
	action string
	fence  Fence
	set    map[string]any
	// guards narrow the UPDATE beyond the fence; mismatch explains a row
	// they refused (nil when they did not).
	guards   []guard
	mismatch func(*models.Operation) error
	// ends marks a lease-ending write: it clears the lease and records the
	// token it ended. replayed reports that a stored row whose lease this
	// fence ended shows exactly this write's result.
	ends     bool
	replayed func(*models.Operation) bool
}

// fencedUpdate applies w only while the operation is attempted and still
// leased under the fence's token at the lease clock's now. Otherwise nothing
// changes and the stored row says why: a replay of this very write, a
// *LeaseLostError with the reason, or ErrNotFound. A single write is a batch
// of one: the same statement and the same explanation as the batched
// writes, so the two cannot drift apart.
func (r *Repository) fencedUpdate(ctx context.Context, w fencedWrite) (*FencedWrite, error) {
	if err := w.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", w.action, err)
	}
	r.prepare(&w)
	out, err := r.applyFenced(ctx, []fencedWrite{w})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", w.action, w.fence, err)
	}
	return out[0].Write, out[0].Err
}

// validate checks the fence and every value the write would store, the one
// check the single and the batched paths share.
func (w fencedWrite) validate() error {
	if err := w.fence.validate(); err != nil {
		return err
	}
	for col, v := range w.set {
		if err := requireText(col, v); err != nil {
			return err
		}
	}
	return nil
}

// prepare adds what every fenced write sets: updated_at, and for a
// lease-ending write the cleared lease and the token it ended.
func (r *Repository) prepare(w *fencedWrite) {
	w.set["updated_at"] = r.nowMillis()
	if w.ends {
		w.set["lease_token"], w.set["lease_expires_at"], w.set["ended_lease_token"] = nil, nil, w.fence.LeaseToken
	}
}

// explain says why w did not change the stored row op: a replay of this
// very write, a mismatch of its own guards, or a *LeaseLostError.
func (r *Repository) explain(ctx context.Context, w fencedWrite, op *models.Operation) (*FencedWrite, error) {
	endedHere := op.EndedLeaseToken != nil && *op.EndedLeaseToken == w.fence.LeaseToken
	if endedHere && w.replayed != nil && w.replayed(op) {
		r.emit(ctx, EventReplay, 1, w.action)
		return &FencedWrite{Operation: op, Replay: true}, nil
	}
	lost := &LeaseLostError{Action: w.action, Fence: w.fence, State: op.State}
	var mismatch error
	if w.mismatch != nil {
		mismatch = w.mismatch(op)
	}
	switch {
	case op.State != models.OperationAttempted:
		lost.Reason = LeaseLostFinished
	case op.LeaseToken == nil && endedHere:
		lost.Reason = LeaseLostEnded
	case op.LeaseToken == nil:
		lost.Reason = LeaseLostNotHeld
	case *op.LeaseToken != w.fence.LeaseToken:
		lost.Reason = LeaseLostHeldByOther
	case mismatch != nil:
		// A guard of the write's own: invalid input (a document-id
		// mismatch), or a lost lease in its own words (a failure report
		// whose attempt another report already counted), which is counted
		// as every lost lease is.
		var guardLost *LeaseLostError
		if errors.As(mismatch, &guardLost) {
			r.emit(ctx, EventLeaseLost, 1, guardLost.Reason)
		}
		return nil, mismatch
	default:
		lost.Reason = LeaseLostExpired
	}
	r.emit(ctx, EventLeaseLost, 1, lost.Reason)
	return nil, lost
}
