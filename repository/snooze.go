package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/fence"
)

// SnoozeParams reschedules a leased operation without counting an attempt.
type SnoozeParams struct {
	Fence
	// Until is when the operation is due again; required. A provider's
	// Retry-After, a rate limit's reset or a dependency not ready yet.
	Until time.Time
}

// Validate reports, as ErrInvalidInput, what SnoozeOperation(s) would
// refuse in p before writing anything.
func (p SnoozeParams) Validate() error {
	if err := p.Fence.validate(); err != nil {
		return fmt.Errorf("snooze: %w", err)
	}
	if err := requireTime("snooze until", p.Until); err != nil {
		return fmt.Errorf("snooze: %w", err)
	}
	return nil
}

// SnoozeOperation ends the lease and makes the operation due again at
// p.Until, leaving its attempts, last failure kind and status as they are:
// the attempt did not fail, it was put off (River's and Oban's snooze). The
// backoff is not consulted, so a snoozed operation never becomes dead. A
// retry by the same fence with the same time is a replay.
func (r *Repository) SnoozeOperation(ctx context.Context, p SnoozeParams) (_ *FencedWrite, err error) {
	ctx, end := r.start(ctx, "SnoozeOperation")
	defer end(&err)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return r.fencedUpdate(ctx, snoozeWrite(p))
}

// SnoozeOperations snoozes many leased operations in one statement, each as
// SnoozeOperation would. A bad item fails the whole call with
// ErrInvalidInput and writes nothing.
func (r *Repository) SnoozeOperations(ctx context.Context, ps []SnoozeParams) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "SnoozeOperations")
	defer end(&err)
	ws := make([]fence.Write, len(ps))
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("snooze operations: item %d: %w", i, err)
		}
		ws[i] = snoozeWrite(p)
	}
	return r.batchFenced(ctx, "snooze operations", ws)
}

// snoozeWrite is the fenced write of one snooze.
func snoozeWrite(p SnoozeParams) fence.Write {
	return fence.Snooze(fence.Target(p.Fence), p.Until.UnixMilli())
}
