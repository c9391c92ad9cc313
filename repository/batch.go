package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/fence"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
)

// BatchOutcome is one operation's result in a batched fenced write, in the
// order the batch named it: the stored row (flagged as a replay where the
// write had already landed), or why nothing was written.
type BatchOutcome struct {
	Fence Fence
	// Write is the stored row after the write; nil when Err is set.
	Write *FencedWrite
	// Err is a *LeaseLostError (with its reason), ErrNotFound, or a
	// mismatch of the write's own guards (ErrInvalidInput).
	Err error
}

// CommitOperations commits many leased operations in one statement, with
// the guarantees of CommitOperation for each: fenced on its token and an
// unexpired lease, a replay when it had already landed. A bad item fails the
// whole call with ErrInvalidInput and writes nothing.
func (r *Repository) CommitOperations(ctx context.Context, ps []CommitParams) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "CommitOperations")
	defer end(&err)
	ws := make([]fence.Write, len(ps))
	for i, p := range ps {
		if ws[i], err = commitWrite(p); err != nil {
			return nil, fmt.Errorf("commit operations: item %d: %w", i, err)
		}
	}
	return r.batchFenced(ctx, "commit operations", ws)
}

// RecordOperationFailures records many failed attempts: one read of the
// rows (for their attempt counts), then one statement, each write guarded
// as RecordOperationFailure's.
func (r *Repository) RecordOperationFailures(ctx context.Context, ps []FailureParams) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "RecordOperationFailures")
	defer end(&err)
	fences := make([]Fence, len(ps))
	for i, p := range ps {
		if err := validateFailure(p); err != nil {
			return nil, fmt.Errorf("record failures: item %d: %w", i, err)
		}
		fences[i] = p.Fence
	}
	current, err := r.readFenced(ctx, fences)
	if err != nil {
		return nil, fmt.Errorf("record failures: %w", err)
	}
	ws := make([]fence.Write, 0, len(ps))
	var missing []BatchOutcome
	for _, p := range ps {
		cur, ok := current[keyOf(p.Fence)]
		if !ok {
			missing = append(missing, BatchOutcome{Fence: p.Fence, Err: fmt.Errorf("record failure %s: %w", p.Fence, ErrNotFound)})
			continue
		}
		ws = append(ws, r.failureWrite(p, cur))
	}
	out, err := r.batchFenced(ctx, "record failures", ws)
	if err != nil {
		return nil, err
	}
	return inOrder(fences, append(out, missing...)), nil
}

// ReleaseOperations gives many held leases back in one statement.
func (r *Repository) ReleaseOperations(ctx context.Context, fs []Fence) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "ReleaseOperations")
	defer end(&err)
	ws := make([]fence.Write, len(fs))
	for i, f := range fs {
		ws[i] = r.releaseWrite(f)
	}
	return r.batchFenced(ctx, "release operations", ws)
}

// HeartbeatOperations extends many held leases to now + extendFor in one
// statement; a lease no longer held is a *LeaseLostError in its outcome.
func (r *Repository) HeartbeatOperations(ctx context.Context, fs []Fence, extendFor time.Duration) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "HeartbeatOperations")
	defer end(&err)
	if extendFor <= 0 {
		return nil, fmt.Errorf("heartbeat operations: %w", invalid("lease extension %v must be positive", extendFor))
	}
	ws := make([]fence.Write, len(fs))
	for i, f := range fs {
		ws[i] = r.heartbeatWrite(f, extendFor)
	}
	return r.batchFenced(ctx, "heartbeat operations", ws)
}

// FinishOperations ends many leased operations in state (dead or
// reconcile_only) in one statement, with no cause given (as
// MarkOperationDead).
func (r *Repository) FinishOperations(ctx context.Context, fs []Fence, state string) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "FinishOperations")
	defer end(&err)
	ps := make([]FinishParams, len(fs))
	for i, f := range fs {
		ps[i] = FinishParams{Fence: f}
	}
	return r.finishOperations(ctx, ps, state)
}

// FinishOperationsWith ends many leased operations in state (dead or
// reconcile_only) in one statement, each with its own cause (a worker's
// worker.Dead(kind, status)). A bad item fails the whole call with
// ErrInvalidInput and writes nothing.
func (r *Repository) FinishOperationsWith(ctx context.Context, ps []FinishParams, state string) (_ []BatchOutcome, err error) {
	ctx, end := r.start(ctx, "FinishOperationsWith")
	defer end(&err)
	return r.finishOperations(ctx, ps, state)
}

func (r *Repository) finishOperations(ctx context.Context, ps []FinishParams, state string) ([]BatchOutcome, error) {
	if state != models.OperationDead && state != models.OperationReconcileOnly {
		return nil, fmt.Errorf("finish operations: %w", invalid("state %q is not dead or reconcile_only", state))
	}
	ws := make([]fence.Write, len(ps))
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("finish operations: item %d: %w", i, err)
		}
		ws[i] = r.finishWrite(p, state)
	}
	return r.batchFenced(ctx, "finish operations", ws)
}

type opKey struct{ caller, id string }

func keyOf(f Fence) opKey { return opKey{f.CallerDID, f.OperationID} }

// batchFenced applies ws in one UPDATE joined to the batch's rows (see
// fence.PlanOf): each row is matched by its own fence (caller, id, token) and
// guards, and every row must still be attempted and leased at the lease
// clock's now. Rows it did not change are read back in one SELECT and
// explained as the single-row writes explain them.
func (r *Repository) batchFenced(ctx context.Context, action string, ws []fence.Write) ([]BatchOutcome, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	seen := map[opKey]bool{}
	for i := range ws {
		if err := validateWrite(ws[i]); err != nil {
			return nil, fmt.Errorf("%s: item %d: %w", action, i, err)
		}
		k := keyOf(Fence(ws[i].Target))
		if seen[k] {
			return nil, fmt.Errorf("%s: %w", action, invalid("operation %s appears twice", ws[i].Target))
		}
		seen[k] = true
		ws[i].Stamp(r.nowMillis())
	}
	out, err := r.applyFenced(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	return out, nil
}

// applyFenced runs validated, prepared writes as one UPDATE joined to their
// rows (see fence.PlanOf) and explains each: the one statement of every lease
// holder's write, single (a batch of one) or batched.
func (r *Repository) applyFenced(ctx context.Context, ws []fence.Write) ([]BatchOutcome, error) {
	plan, err := fence.PlanOf(r.dialect.Name(), ws)
	if err != nil {
		return nil, invalidText(err)
	}
	rows := make([]models.Operation, 0, len(ws)) // scanned in place, not grown
	// Each row found by its key only (see store.StillHeld).
	q := r.scanOps(r.conn(ctx), &rows).Clauses(r.returnOps, plan.From).Where(store.StillHeld(r.leaseNow()))
	for _, c := range plan.Where {
		q = q.Where(c)
	}
	if err := q.Updates(plan.Set).Error; err != nil {
		return nil, err
	}
	written := make(map[opKey]*models.Operation, len(rows))
	var ended []*models.Operation
	released := map[opKey]bool{}
	for i := range rows {
		written[opKey{rows[i].CallerDID, rows[i].OperationID}] = &rows[i]
	}
	for _, w := range ws {
		k := keyOf(Fence(w.Target))
		if op := written[k]; op != nil && w.Ends {
			ended = append(ended, op)
			released[k] = w.Action == fence.ActionRelease
		}
	}
	// A lease a write ended frees its account's slot (flow control).
	if err := r.wakeFlow(ctx, ended, released); err != nil {
		r.log.WarnContext(ctx, "connstore: waking accounts after a write failed; they wait for their next lease expiry", "err", err)
	}
	return r.outcomes(ctx, ws, written)
}

// outcomes explains every write: written rows as they were returned, the
// others from one read of their stored rows.
func (r *Repository) outcomes(ctx context.Context, ws []fence.Write, written map[opKey]*models.Operation) ([]BatchOutcome, error) {
	var refused []Fence
	for _, w := range ws {
		if written[keyOf(Fence(w.Target))] == nil {
			refused = append(refused, Fence(w.Target))
		}
	}
	stored, err := r.readFenced(ctx, refused)
	if err != nil {
		return nil, err
	}
	out := make([]BatchOutcome, len(ws))
	for i, w := range ws {
		f := Fence(w.Target)
		k := keyOf(f)
		out[i].Fence = f
		switch op := written[k]; {
		case op != nil:
			out[i].Write = &FencedWrite{Operation: op}
		case stored[k] == nil:
			out[i].Err = fmt.Errorf("%s %s: %w", w.Action, f, ErrNotFound)
		default:
			out[i].Write, out[i].Err = r.explain(ctx, w, stored[k])
		}
	}
	return out, nil
}

// readFenced reads the operations the fences name, from the primary, in one
// statement.
func (r *Repository) readFenced(ctx context.Context, fs []Fence) (map[opKey]*models.Operation, error) {
	out := make(map[opKey]*models.Operation, len(fs))
	if len(fs) == 0 {
		return out, nil
	}
	keys := make([][]any, len(fs))
	for i, f := range fs {
		keys[i] = []any{f.CallerDID, f.OperationID}
	}
	// The keys travel as a row source, as the batch itself does: a
	// row-value IN list of thousands of tuples exceeds PostgreSQL's parser
	// stack and SQLite's bound-parameter limit.
	from, vars, err := jsonTable(r.dialect.Name(), []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id")}, keys)
	if err != nil {
		return nil, err
	}
	var rows []models.Operation
	err = findOps(r.primary(ctx).Where(store.KeyInRows(from, vars)), &rows)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		out[opKey{rows[i].CallerDID, rows[i].OperationID}] = &rows[i]
	}
	return out, nil
}

// inOrder puts outcomes back in the order of fences.
func inOrder(fences []Fence, outs []BatchOutcome) []BatchOutcome {
	at := make(map[opKey]BatchOutcome, len(outs))
	for _, o := range outs {
		at[keyOf(o.Fence)] = o
	}
	sorted := make([]BatchOutcome, len(fences))
	for i, f := range fences {
		sorted[i] = at[keyOf(f)]
	}
	return sorted
}
