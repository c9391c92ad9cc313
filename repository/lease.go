package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/fence"
	"github.com/connstore/connstore/internal/flow"
	"github.com/connstore/connstore/internal/store"
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
// free or expired, earliest due first (a row without a next attempt time is
// due since it was recorded), under one fresh lease token (returned on every
// row). A claimed row's next attempt time becomes its lease's expiry: while
// it is held it is not due, and if its holder dies it comes due when the
// lease runs out. It is one UPDATE … WHERE key IN (SELECT … LIMIT n)
// RETURNING *: on Postgres the inner SELECT takes FOR UPDATE SKIP LOCKED, so
// concurrent claimers neither block on nor double-claim a row; on SQLite the
// single writer makes the statement atomic. Lease times follow the
// repository's LeaseClock.
func (r *Repository) ClaimOperations(ctx context.Context, p ClaimParams) (_ []models.Operation, err error) {
	ctx, end := r.start(ctx, "ClaimOperations")
	defer end(&err)
	res, err := r.claim(ctx, p)
	return res.Operations, err
}

// ClaimResult is what a claim leased, and what held other work back.
type ClaimResult struct {
	// Operations are the leased operations, as ClaimOperations returns them.
	Operations []models.Operation
	// Throttled is true when accounts under flow control were looked at and
	// held back by their limits (a cap, a rate, a pause, their connector's):
	// the claim was gated, not idle.
	Throttled bool
	// NextEligible is the earliest time an account under flow control can
	// be served again (its pause's end, its next token, a lease's expiry),
	// by the repository's clock; zero when no account waits on time. A pool
	// that claimed nothing sleeps until then rather than a whole poll.
	NextEligible time.Time
}

// Claim is ClaimOperations with what held work back (see ClaimResult).
func (r *Repository) Claim(ctx context.Context, p ClaimParams) (_ ClaimResult, err error) {
	ctx, end := r.start(ctx, "Claim")
	defer end(&err)
	return r.claim(ctx, p)
}

// claim is ClaimOperations' and Claim's one body. With no account under
// flow control it is the plain claim alone: one UPDATE of the rows the
// plain claim index gives, as before flow control existed. With some, in
// the same transaction: rows of controlled accounts met among the first
// due plain rows are moved under flow control (see convertToFlow), the
// flow claim serves the eligible accounts (internal/flow), and the plain
// claim fills the rest of the limit with rows of accounts under none.
func (r *Repository) claim(ctx context.Context, p ClaimParams) (ClaimResult, error) {
	var res ClaimResult
	if err := errors.Join(requireLimit(p.Limit), requireText("claim", p)); err != nil {
		return res, fmt.Errorf("claim operations: %w", err)
	}
	if p.LeaseFor <= 0 {
		return res, fmt.Errorf("claim operations: %w", invalid("lease duration %v must be positive", p.LeaseFor))
	}
	// A token the id source could not make unique (empty) would let every
	// claim's holder write as every other's: refused before anything moves.
	token := r.newID()
	if err := requireKeys("lease token from Options.NewIDFunc", token); err != nil {
		return res, fmt.Errorf("claim operations: %w", err)
	}
	now := r.now()
	// Room for the claim up front (up to a bound: a huge Limit must not
	// allocate before anything is due): rows are decoded into it in place.
	rows := make([]models.Operation, 0, min(p.Limit, 4096))
	lease := r.leaseSet(token, now, p.LeaseFor)
	// Bitmap scans and sorts off: with statistics that lag the queue (a due
	// backlog the last ANALYZE did not see), the planner expects a handful
	// of due rows and reads all of them, through a bitmap or another index
	// on state, and sorts them, on every claim; the claim index read in
	// order stops at the limit and needs neither.
	// The rows are picked once, in a materialized CTE, and the UPDATE
	// changes those (store.PickedUpdate): a pick in the UPDATE's condition
	// could run again per row the repository's scopes found, each run
	// locking more rows.
	plain := func(in *Repository, limit int, filtered bool) error {
		pp := p
		pp.Limit = limit
		q := in.scanOps(in.conn(ctx), &rows).Clauses(clause.Returning{}, store.PickedUpdate(in.dueToClaim(ctx, pp, now))).
			Where(store.InPicked)
		if filtered {
			q = q.Where(flow.NotControlled)
		}
		return q.Updates(lease).Error
	}
	// A planner with lagging statistics would rather read the whole due
	// range and sort it: told not to for this statement, and to plan it
	// once per connection (claimStatementPlan).
	err := r.withPlanSettings(ctx, claimStatementPlan, func(tx *gorm.DB) error {
		in := r.WithTx(tx)
		on, err := flow.On(in.base(ctx))
		if err != nil || !on {
			return cmp.Or(err, plain(in, p.Limit, false))
		}
		moved, err := in.convertToFlow(ctx, p, now)
		if err != nil {
			return err
		}
		fr, err := in.flowClaim(ctx, p, now, lease)
		if err != nil {
			return err
		}
		rows = append(rows, fr.Ops...)
		res.Throttled = fr.Read > 0 && len(fr.Ops) == 0
		switch {
		case moved > 0:
			// Rows just moved under flow control may be claimable at once.
			res.NextEligible = now
		case fr.NextEligible < flow.Never:
			res.NextEligible = time.UnixMilli(fr.NextEligible)
		}
		if rest := p.Limit - len(rows); rest > 0 {
			return plain(in, rest, true)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("claim operations: %w", err)
	}
	if len(rows) > 0 {
		r.emit(ctx, EventClaimed, int64(len(rows)), "")
	}
	if res.Throttled {
		r.emit(ctx, EventThrottled, 1, "")
	}
	res.Operations = inKeyOrder(rows)
	return res, nil
}

// leaseSet is what a claim writes on every row it leases.
func (r *Repository) leaseSet(token string, now time.Time, leaseFor time.Duration) map[string]any {
	return map[string]any{
		"lease_token": token, "lease_expires_at": r.leaseUntil(leaseFor),
		// Not due again until the lease would expire: a held row
		// leaves the claim's index range, and a crashed holder's
		// row comes due when its lease runs out.
		// (by the application's clock, as every due time is; the
		// lease itself follows the lease clock).
		"next_attempt_at": now.Add(leaseFor).UnixMilli(),
		"updated_at":      now.UnixMilli(),
	}
}

// inKeyOrder returns ops in key order (caller, operation id), each row moved
// once: sorting the rows themselves swapped ~30-column structs n log n times,
// a twentieth of the worker pool's CPU at a claim of a thousand.
func inKeyOrder(ops []models.Operation) []models.Operation {
	order := positions(len(ops))
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(ops[a].CallerDID, ops[b].CallerDID), strings.Compare(ops[a].OperationID, ops[b].OperationID))
	})
	out := make([]models.Operation, len(ops))
	for i, j := range order {
		out[i] = ops[j]
	}
	return out
}

// claimPlan are the planner settings of a claim and of ListOperationsByState:
// one ordered range of the claim index, never a bitmap of it sorted.
var claimPlan = []dialect.Setting{{Name: "enable_bitmapscan", Value: "off"}, {Name: "enable_sort", Value: "off"}}

// claimStatementPlan is claimPlan and a generic plan for the claim: a plan
// made without the due time's value, the same for every shape of the
// journal. Where the driver prepares statements (pgx's default statement
// cache), each connection then plans the claim once and reuses the plan;
// left to choose, PostgreSQL kept a generic plan on a small journal but
// planned every claim afresh on a large one (its estimate for the due time
// it was given being cheaper there), and planning was most of an idle
// poll's server time: 0.8 against 0.55 ms a claim at 1M and 10k rows.
// Behind a pooler (unnamed or simple statements) nothing is reused and the
// plan is made per claim, as before. A generic plan is as bounded as a
// custom one: bitmaps and sorts are off, so the due rows are read in the
// claim index's order, and the pick's limit is written as a number
// (dialect.FixedLimit, rounded up to store.ClaimBucket so that a pool's
// varying limits make a dozen texts, not one per limit), so the plan
// expects the rows it will get and joins the picked keys to the table by
// key (TestClaimShapesAt1M and TestClaimOfAWholeJournalBacklog replay the
// claim as a prepared statement). Join methods are not set here: the
// journal's finished-rows trigger runs inside the claim's transaction, and
// PL/pgSQL keeps the plan its first run in a session made; made with hash
// and merge joins off, its join of a batched commit's old and new rows
// became a nested loop (10.5 s for 10,000 finished rows against 27 ms).
var claimStatementPlan = append(slices.Clip(claimPlan), dialect.Setting{Name: "plan_cache_mode", Value: "force_generic_plan"})

// dueToClaim selects the keys a claim leases: attempted rows due by now,
// earliest due first, with a free or expired lease. It is one range of the
// claim index read in its order and stopped at the limit: a fresh backlog,
// due retries, everything backed off or run-at in the future, an empty
// queue, and many live leases (a claim moves a row's due time to its
// lease's expiry, so a held row is not in the range) all cost about the
// rows claimed, or one probe when nothing is due. There is no second branch
// for a lagging planner to misjudge (a NULL branch was planned as a scan of
// the table when its estimate multiplied two selectivities). The state is
// a literal, not a parameter, so both databases can prove the partial
// index's predicate from the query.
func (r *Repository) dueToClaim(ctx context.Context, p ClaimParams, now time.Time) *gorm.DB {
	return r.dueToClaimWith(ctx, p, now, "caller_did", "operation_id")
}

// dueToClaimWith is dueToClaim selecting cols (the key first).
func (r *Repository) dueToClaimWith(ctx context.Context, p ClaimParams, now time.Time, cols ...string) *gorm.DB {
	q := r.conn(ctx).Model(&models.Operation{}).Select(cols).
		Where(store.DueBy(now.UnixMilli())).
		Scopes(scopes.LeaseFreeAt(r.leaseNow())).Order(store.DueAt)
	q = r.dialect.FixedLimit(q, store.ClaimBucket(p.Limit))
	if p.ConnectorName != "" {
		q = q.Scopes(scopes.Connector(p.ConnectorName))
	}
	if p.OwnerDID != "" {
		q = q.Scopes(scopes.Owner(p.OwnerDID))
	}
	// Concurrent claimers neither block on nor double-claim a row; without
	// statistics SQLite would prefer an equality on state (another index)
	// and sort every due row.
	q = r.dialect.LockRows(q, false, true)
	q = r.dialect.ReadIndex(q, "kubun_connector_operation", "kubun_connector_operation_claim_idx")
	// Unscoped: the scopes are the inner query's, and the outer one reads
	// only its rows.
	return store.FirstDue(r.base(ctx), q, p.Limit, cols...)
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
	return r.fencedUpdate(ctx, r.releaseWrite(f))
}

// heartbeatWrite extends a held lease to now + extendFor, and the row's
// due time with it (see ClaimOperations).
func (r *Repository) heartbeatWrite(f Fence, extendFor time.Duration) fence.Write {
	return fence.Heartbeat(fence.Target(f), r.leaseUntil(extendFor), r.now().Add(extendFor).UnixMilli())
}

// releaseWrite gives a held lease back.
func (r *Repository) releaseWrite(f Fence) fence.Write {
	return fence.Release(fence.Target(f), r.nowMillis())
}
