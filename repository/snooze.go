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
	// PauseAccount also pauses the operation's account until Until (the
	// provider's 429 with Retry-After applies to the account, not to this
	// operation alone): no instance claims the account's operations until
	// then, and an adaptive account's live cap is lowered
	// (AccountLimits.Adaptive). Kind and HTTPStatus are recorded as the
	// operation's last answer; the attempt is not counted, so the
	// provider's throttling never kills an operation.
	PauseAccount bool
	Kind         string
	HTTPStatus   *int64
	// Message is a short text for an operator with a pause's answer,
	// stored as FinishParams.Message is.
	Message string
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
	if err := requireText("snooze kind", p.Kind); err != nil {
		return fmt.Errorf("snooze: %w", err)
	}
	if err := requireText("snooze message", fence.Message(p.Message)); err != nil {
		return fmt.Errorf("snooze: %w", err)
	}
	if (p.Kind != "" || p.HTTPStatus != nil || p.Message != "") && !p.PauseAccount {
		return fmt.Errorf("snooze: %w", invalid("a kind, HTTP status and message are recorded only with PauseAccount"))
	}
	if p.PauseAccount && p.Kind == "" {
		return fmt.Errorf("snooze: %w", invalid("PauseAccount needs a kind (the provider's answer)"))
	}
	if err := requireStatus(p.HTTPStatus); err != nil {
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
	w, err := r.fencedUpdate(ctx, snoozeWrite(p, r.nowMillis()))
	if err == nil && p.PauseAccount && !w.Replay {
		err = r.pause(ctx, AccountKey{w.ConnectorName, w.AccountKey}, p.Until.UnixMilli(), true)
	}
	return w, err
}

// SnoozeOperations snoozes many leased operations in one statement, each as
// SnoozeOperation would. A bad item fails the whole call with
// ErrInvalidInput and writes nothing.
func (r *Repository) SnoozeOperations(ctx context.Context, ps []SnoozeParams) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "SnoozeOperations")
	defer end(&err)
	// Pauses and plain snoozes go in statements of their own: a pause sets
	// the last answer, and a statement that set it on some rows only
	// would name the column for all (see migration 0023's trigger).
	var pauses, plain []fence.Write
	fences := make([]Fence, len(ps))
	seen := map[opKey]bool{}
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("snooze operations: item %d: %w", i, err)
		}
		if seen[keyOf(p.Fence)] {
			return nil, fmt.Errorf("snooze operations: %w", invalid("operation %s appears twice", p.Fence))
		}
		seen[keyOf(p.Fence)] = true
		fences[i] = p.Fence
		if p.PauseAccount {
			pauses = append(pauses, snoozeWrite(p, r.nowMillis()))
		} else {
			plain = append(plain, snoozeWrite(p, r.nowMillis()))
		}
	}
	var all []BatchOutcome
	for _, ws := range [][]fence.Write{plain, pauses} {
		out, err := r.batchFenced(ctx, "snooze operations", ws)
		if err != nil {
			return nil, err
		}
		all = append(all, out...)
	}
	// Validated before either statement: bad input writes nothing. A
	// failure of the second after the first landed is retried whole, and
	// the first's rows are then replays.
	out := inOrder(fences, all)
	for i, p := range ps {
		if o := out[i]; p.PauseAccount && o.Err == nil && !o.Write.Replay {
			if err := r.pause(ctx, AccountKey{o.Write.ConnectorName, o.Write.AccountKey}, p.Until.UnixMilli(), true); err != nil {
				return nil, fmt.Errorf("snooze operations: %w", err)
			}
		}
	}
	return out, nil
}

// snoozeWrite is the fenced write of one snooze.
func snoozeWrite(p SnoozeParams, now int64) fence.Write {
	if !p.PauseAccount {
		return fence.Snooze(fence.Target(p.Fence), p.Until.UnixMilli(), nil)
	}
	w := fence.Snooze(fence.Target(p.Fence), p.Until.UnixMilli(),
		&fence.Answer{Kind: p.Kind, HTTPStatus: p.HTTPStatus, Message: p.Message, At: now})
	// Under flow control from now on: the plain claim must not lease it
	// around its account's pause.
	w.Set["flow"] = true
	return w
}
