package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// DefaultOverdueAfter is how long an attempted operation may sit due and
// unclaimed before the admin calls count it overdue. A running pool picks
// a due operation up within its poll interval (100 ms by default); one
// still waiting after a minute means no pool is running or it is
// saturated.
const DefaultOverdueAfter = time.Minute

// OperationCountsParams selects what CountOperations counts.
type OperationCountsParams struct {
	// ConnectorName and OwnerDID narrow the counts; empty counts every
	// connector (owner).
	ConnectorName, OwnerDID string
	// States are the states counted; empty means the ones an operator
	// watches: attempted, dead and reconcile_only. Committed rows are most
	// of a journal (until retention collects them) and are counted only
	// when named, since counting them reads all of them.
	States []string
	// OverdueAfter overrides DefaultOverdueAfter; it must not be negative.
	OverdueAfter time.Duration
}

// OperationCount is the queue of one connector, owner and state.
type OperationCount struct {
	ConnectorName, OwnerDID, State string
	// Count is the number of operations in the state.
	Count int64
	// Due counts attempted operations due now and not under a live lease:
	// what the next claims will take (the queue depth).
	Due int64
	// Leased counts attempted operations under a live lease (in flight).
	Leased int64
	// Overdue counts the Due operations that have been due for longer than
	// OverdueAfter.
	Overdue int64
	// OldestDue is how long the longest-waiting Due operation has been due;
	// zero when none is.
	OldestDue time.Duration
}

// countRow is what the counting statement returns per group.
type countRow struct {
	ConnectorName               string
	OwnerDID                    string `gorm:"column:owner_did"`
	State                       string
	Total, Due, Leased, Overdue int64
	OldestDueAt                 *int64
}

// CountOperations returns the operations per connector, owner and state,
// ordered by them: how deep each queue is, how much of it is in flight or
// overdue, and how long its oldest due operation has waited. The statement
// reads the entries of the state-led indexes for the states asked for, so
// its cost is the number of rows counted; the default states leave the
// committed bulk out. A scoped repository counts only its own rows.
func (r *Repository) CountOperations(ctx context.Context, p OperationCountsParams) (_ []OperationCount, err error) {
	ctx, end := r.start(ctx, "CountOperations")
	defer end(&err)
	states, overdueAfter, err := p.normalize()
	if err != nil {
		return nil, fmt.Errorf("count operations: %w", err)
	}
	now := r.nowMillis()
	overdueAt := now - overdueAfter.Milliseconds()
	counts, vars := store.QueueCounts(now, r.leaseNow(), overdueAt)
	q := r.conn(ctx).Model(&models.Operation{}).Select(counts, vars...).
		Scopes(scopes.State(states...)).
		Group("connector_name, owner_did, state").Order("connector_name, owner_did, state")
	q = narrow(q, p.ConnectorName, p.OwnerDID)
	var rows []countRow
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count operations: %w", err)
	}
	out := make([]OperationCount, len(rows))
	for i, row := range rows {
		out[i] = OperationCount{ConnectorName: row.ConnectorName, OwnerDID: row.OwnerDID, State: row.State,
			Count: row.Total, Due: row.Due, Leased: row.Leased, Overdue: row.Overdue}
		if row.OldestDueAt != nil && *row.OldestDueAt < now {
			out[i].OldestDue = time.Duration(now-*row.OldestDueAt) * time.Millisecond
		}
	}
	return out, nil
}

// operationStates are the states an operation may be in.
var operationStates = []string{models.OperationAttempted, models.OperationCommitted,
	models.OperationDead, models.OperationReconcileOnly}

func (p OperationCountsParams) normalize() ([]string, time.Duration, error) {
	states := p.States
	if len(states) == 0 {
		states = []string{models.OperationAttempted, models.OperationDead, models.OperationReconcileOnly}
	}
	overdue, err := overdueBound(p.OverdueAfter)
	return states, overdue, errors.Join(requireStates(states), optionalKeys("connector", p.ConnectorName, "owner", p.OwnerDID), err)
}

// overdueBound is how long a due operation may wait before it counts as
// overdue: d, or DefaultOverdueAfter for zero; a negative d is refused.
func overdueBound(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, invalid("overdue after %v is negative", d)
	case d == 0:
		return DefaultOverdueAfter, nil
	}
	return d, nil
}

// requireStates refuses a state no operation can be in.
func requireStates(states []string) error {
	for _, s := range states {
		if !slices.Contains(operationStates, s) {
			return invalid("state %q is not one of %q", s, operationStates)
		}
	}
	return nil
}

// optionalKeys checks the non-empty ones of name/value pairs as keys.
func optionalKeys(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			if err := requireKeys(pairs[i], pairs[i+1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// narrow adds the optional connector and owner filters.
func narrow(q *gorm.DB, connector, owner string) *gorm.DB {
	if connector != "" {
		q = q.Scopes(scopes.Connector(connector))
	}
	if owner != "" {
		q = q.Scopes(scopes.Owner(owner))
	}
	return q
}

// ListByStateParams pages through the operations in one state.
type ListByStateParams struct {
	// State is the state listed: dead, reconcile_only, attempted or
	// committed.
	State string
	// Overdue lists only attempted operations due and unclaimed for longer
	// than OverdueAfter (State must be attempted or empty).
	Overdue bool
	// OverdueAfter overrides DefaultOverdueAfter; it must not be negative.
	OverdueAfter time.Duration
	// ConnectorName and OwnerDID narrow the listing; empty lists all.
	ConnectorName, OwnerDID string
	// AccountKey, CallerDID and DocumentID narrow it further (empty: any).
	// Like the owner and the connector they filter the state's rows as a
	// page reads them in order: no index per filter (each would cost every
	// write of the journal an entry), so a narrowed page of a queue state
	// costs at most the rows in that state.
	AccountKey, CallerDID, DocumentID string
	// After resumes after this row (CursorAfter of the previous page's
	// last row); nil starts at the first.
	After *ListCursor
	// Limit is the page size; it must be positive.
	Limit int
}

// narrow applies the listing's filters to q.
func (p *ListByStateParams) narrow(q *gorm.DB) *gorm.DB {
	q = narrow(q, p.ConnectorName, p.OwnerDID)
	if p.AccountKey != "" {
		q = q.Scopes(scopes.Eq("account_key", p.AccountKey))
	}
	if p.CallerDID != "" {
		q = q.Scopes(scopes.Caller(p.CallerDID))
	}
	if p.DocumentID != "" {
		q = q.Scopes(scopes.Eq("document_id", p.DocumentID))
	}
	return q
}

// ListCursor is where a ListOperationsByState page resumes: the last row's
// key and record-order number, and its due time for the overdue listing,
// which is in due order.
type ListCursor struct {
	OperationKey
	// DueAt is the row's due time in epoch milliseconds (its next attempt
	// time, or its record time when it has none); used only by Overdue.
	DueAt int64
	// Seq is the row's models.Operation.Seq, the state listing's order;
	// zero to look it up by the key (a cursor built from a printed key).
	Seq int64
}

// CursorAfter returns the cursor just after op.
func CursorAfter(op *models.Operation) *ListCursor {
	due := op.CreatedAt
	if op.NextAttemptAt != nil {
		due = *op.NextAttemptAt
	}
	return &ListCursor{OperationKey: OperationKey{CallerDID: op.CallerDID, OperationID: op.OperationID}, DueAt: due, Seq: op.Seq}
}

// ListOperationsByState returns up to Limit operations in one state after
// After: in record order (seq; migration 0019 keyed the state index by it
// instead of (caller, operation id), so a claim's and a commit's new row
// versions write a narrow entry), a keyset page of the state index; the overdue listing in due order, longest waiting
// first, a keyset page of the claim index. Either way a page costs what it
// returns however long the journal is, whatever share of the queue is
// overdue. Narrowed by owner or connector (or a scoped repository's
// scopes), a page reads the state's rows in order until it fills: at most
// the rows in that state, the queue's size, never the committed journal (an
// index per owner would cost every write of the journal one more index
// entry). A short page is the last one; CursorAfter of the last row is the
// next page's After.
func (r *Repository) ListOperationsByState(ctx context.Context, p ListByStateParams) (_ []models.Operation, err error) {
	ctx, end := r.start(ctx, "ListOperationsByState")
	defer end(&err)
	if p.Overdue && p.State == "" {
		p.State = models.OperationAttempted
	}
	errs := []error{requireStates([]string{p.State}), requireLimit(p.Limit),
		optionalKeys("connector", p.ConnectorName, "owner", p.OwnerDID, "account", p.AccountKey, "caller", p.CallerDID,
			"document", p.DocumentID)}
	if p.Overdue && p.State != models.OperationAttempted {
		errs = append(errs, invalid("only attempted operations can be overdue, not %s", p.State))
	}
	overdue, err := overdueBound(p.OverdueAfter)
	errs = append(errs, err)
	p.OverdueAfter = overdue
	if p.After != nil {
		errs = append(errs, p.After.validate())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("list operations by state: %w", err)
	}
	// A page is read in its index's order and stops when full: the overdue
	// page as one range of the claim index, a state's page along the state
	// key index (or the primary key for committed rows), filtering an owner
	// or connector as it goes. A planner would rather read every row of the
	// range or the state and sort them, as it would for a claim, and is told
	// not to the same way: without statistics for an overdue page (every
	// overdue row for a page of 50); for an owner's page near its cost
	// boundary with fresh ones (20,000 attempted rows for 50 of one owner's
	// in 13, at random_page_cost 10, and at the default once in a dozen
	// ANALYZE samples).
	var rows []models.Operation
	err = r.withPlanSettings(ctx, claimPlan,
		func(tx *gorm.DB) error {
			var err error
			rows, err = r.WithTx(tx).listPage(ctx, p)
			return err
		})
	return rows, err
}

// listPage reads one ListOperationsByState page (p validated, its
// OverdueAfter resolved).
func (r *Repository) listPage(ctx context.Context, p ListByStateParams) ([]models.Operation, error) {
	if p.Overdue {
		return r.overduePage(ctx, p)
	}
	var after []any
	if p.After != nil {
		seq, err := r.cursorSeq(ctx, p.After.Seq, p.After.OperationKey)
		if err != nil {
			return nil, fmt.Errorf("list %s operations: %w", p.State, err)
		}
		after = []any{seq}
	}
	q := r.conn(ctx).Scopes(scopes.State(p.State), scopes.After([]string{"seq"}, after))
	var rows []models.Operation
	if err := findOps(p.narrow(q).Limit(p.Limit), &rows); err != nil {
		return nil, fmt.Errorf("list %s operations: %w", p.State, err)
	}
	return rows, nil
}

// overduePage reads one page of the overdue listing: the overdue rows of
// accounts under no flow control (the plain claim index) and of accounts
// under flow control (its own index in due order, migration 0020), each a
// keyset range read in due order up to the page's size, merged.
func (r *Repository) overduePage(ctx context.Context, p ListByStateParams) ([]models.Operation, error) {
	var parts [2][]models.Operation
	for i, pred := range []string{store.PlainAttempted, store.FlowAttempted} {
		q := r.conn(ctx).Where(pred).Where(store.DueAtMost(r.nowMillis() - p.OverdueAfter.Milliseconds())).
			Scopes(scopes.LeaseFreeAt(r.leaseNow())).Order(store.DueOrder)
		if p.After != nil {
			q = q.Where(store.DueAfter(p.After.DueAt, p.After.CallerDID, p.After.OperationID))
		}
		if err := findOps(p.narrow(q).Limit(p.Limit), &parts[i]); err != nil {
			return nil, fmt.Errorf("list overdue operations: %w", err)
		}
	}
	return mergeByDue(parts[0], parts[1], p.Limit), nil
}

// mergeByDue merges two pages in due order (store.DueOrder) into one of at
// most limit rows.
func mergeByDue(a, b []models.Operation, limit int) []models.Operation {
	out := make([]models.Operation, 0, min(limit, len(a)+len(b)))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && dueBefore(&a[0], &b[0])) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// dueBefore orders operations as store.DueOrder does.
func dueBefore(x, y *models.Operation) bool {
	dx, dy := x.CreatedAt, y.CreatedAt
	if x.NextAttemptAt != nil {
		dx = *x.NextAttemptAt
	}
	if y.NextAttemptAt != nil {
		dy = *y.NextAttemptAt
	}
	return cmp.Or(cmp.Compare(dx, dy), strings.Compare(x.CallerDID, y.CallerDID), strings.Compare(x.OperationID, y.OperationID)) < 0
}
