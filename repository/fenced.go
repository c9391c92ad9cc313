package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/internal/fence"
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

// fencedUpdate applies w only while the operation is attempted and still
// leased under the fence's token at the lease clock's now. Otherwise nothing
// changes and the stored row says why: a replay of this very write, a
// *LeaseLostError with the reason, or ErrNotFound. A single write is a batch
// of one: the same statement and the same explanation as the batched
// writes, so the two cannot drift apart.
func (r *Repository) fencedUpdate(ctx context.Context, w fence.Write) (*FencedWrite, error) {
	if err := validateWrite(w); err != nil {
		return nil, fmt.Errorf("%s: %w", w.Action, err)
	}
	w.Stamp(r.nowMillis())
	out, err := r.applyFenced(ctx, []fence.Write{w})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", w.Action, w.Target, err)
	}
	return out[0].Write, out[0].Err
}

// validateWrite checks the fence and every value the write would store,
// the one check the single and the batched paths share.
func validateWrite(w fence.Write) error {
	if err := Fence(w.Target).validate(); err != nil {
		return err
	}
	for col, v := range w.Set {
		if err := requireText(col, v); err != nil {
			return err
		}
	}
	return nil
}

// explain turns fence.Explain's verdict on w against the stored row op
// into the write's result: a replay of this very write, the caller's
// error (ErrInvalidInput) where the write's own guard refused its value,
// or a *LeaseLostError, reported as an EventLeaseLost with its reason.
func (r *Repository) explain(ctx context.Context, w fence.Write, op *models.Operation) (*FencedWrite, error) {
	v := fence.Explain(w, op)
	switch {
	case v.Replay:
		r.emit(ctx, EventReplay, 1, w.Action)
		return &FencedWrite{Operation: op, Replay: true}, nil
	case v.Conflict != "":
		return nil, fmt.Errorf("%s %s: %w", w.Action, w.Target, invalid("%s", v.Conflict))
	}
	r.emit(ctx, EventLeaseLost, 1, v.Reason)
	return nil, &LeaseLostError{Action: w.Action, Fence: Fence(w.Target), State: op.State, Reason: v.Reason}
}
