package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/bulk"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// MaxBulk is the most operations one RequeueMatching or CancelMatching
// call matches; a larger action is several calls, each resuming after the
// last (BulkResult.Next).
const MaxBulk = bulk.Max

// BulkParams selects the operations of a bulk action. Its filters are
// ListOperationsByState's, read the same way (the state's rows in order),
// so a call reads at most bulk.ScanRows rows whatever the journal holds.
type BulkParams struct {
	// State is the state acted on: for a requeue dead (the default) or
	// reconcile_only; for a cancel attempted (the only one).
	State string
	// ConnectorName, OwnerDID and AccountKey narrow the action (empty: any).
	ConnectorName, OwnerDID, AccountKey string
	// Before matches only operations last written before it (zero: any);
	// for a dead or reconcile-only operation, when it finished.
	Before time.Time
	// Limit is the most operations matched, 1 to MaxBulk; 0 is MaxBulk.
	Limit int
	// DryRun counts what the call would do and writes nothing.
	DryRun bool
	// After resumes after this row (a previous call's Next).
	After *ListCursor
}

// BulkResult is what a bulk call matched and did.
type BulkResult struct {
	bulk.Result
	// Next is where the next call resumes when More; nil otherwise.
	Next *ListCursor `json:"next,omitempty"`
}

// BulkRequeueParams is a requeue of every operation BulkParams matches.
type BulkRequeueParams struct {
	BulkParams
	// ResetAttempts is RequeueParams'.
	ResetAttempts bool
}

// RequeueMatching requeues the dead (or reconcile-only) operations the
// filter matches, as RequeueOperation does each: in statements of a page
// each, conditional on the state, so an operation another operator moved
// since it was read is left alone (BulkResult.Moved). At most Limit are
// matched per call; More says to call again with After: Next. A dry run
// counts and writes nothing. Bad input is ErrInvalidInput, nothing
// written.
func (r *Repository) RequeueMatching(ctx context.Context, p BulkRequeueParams) (_ *BulkResult, err error) {
	ctx, end := r.start(ctx, "RequeueMatching")
	defer end(&err)
	if p.State == "" {
		p.State = models.OperationDead
	}
	if p.State != models.OperationDead && p.State != models.OperationReconcileOnly {
		return nil, fmt.Errorf("requeue matching: %w", invalid("state %q is not dead or reconcile_only", p.State))
	}
	return r.bulk(ctx, "requeue matching", p.BulkParams, nil, func(q *gorm.DB) *gorm.DB { return q }, r.requeueSet(p.ResetAttempts))
}

// CancelMatching cancels the attempted operations the filter matches, as
// CancelOperation without Force does each: an operation under a live
// lease is never cancelled under its holder (counted as Held when read so,
// and left alone by the write's own lease predicate when it was leased
// after the read: Moved). There is no forced bulk cancel: forcing is a
// decision about one operation. The rest is RequeueMatching's.
func (r *Repository) CancelMatching(ctx context.Context, p BulkParams) (_ *BulkResult, err error) {
	ctx, end := r.start(ctx, "CancelMatching")
	defer end(&err)
	if p.State == "" {
		p.State = models.OperationAttempted
	}
	if p.State != models.OperationAttempted {
		return nil, fmt.Errorf("cancel matching: %w", invalid("state %q: only attempted operations are cancelled", p.State))
	}
	// Held is counted by the lease clock, as the write's guard decides;
	// on the database's clock only the write decides (a row it leaves is
	// counted Moved).
	var held func(op *models.Operation) bool
	if now, ok := r.leaseNow().(int64); ok {
		held = func(op *models.Operation) bool {
			return op.LeaseToken != nil && op.LeaseExpiresAt != nil && *op.LeaseExpiresAt >= now
		}
	}
	guard := func(q *gorm.DB) *gorm.DB { return q.Scopes(scopes.LeaseFreeAt(r.leaseNow())) }
	return r.bulk(ctx, "cancel matching", p, held, guard, r.cancelSet())
}

// bulk validates p and runs the action set over its matches (bulk.Run):
// pages read as ListOperationsByState reads them, each written by one
// UPDATE … RETURNING over the page's keys, conditional on the state and
// guard.
func (r *Repository) bulk(ctx context.Context, action string, p BulkParams, held func(*models.Operation) bool,
	guard func(*gorm.DB) *gorm.DB, set map[string]any) (*BulkResult, error) {
	if p.Limit == 0 {
		p.Limit = MaxBulk
	}
	errs := []error{optionalKeys("connector", p.ConnectorName, "owner", p.OwnerDID, "account", p.AccountKey)}
	if p.Limit < 0 || p.Limit > MaxBulk {
		errs = append(errs, invalid("limit %d is not 1 to %d", p.Limit, MaxBulk))
	}
	var before int64
	if !p.Before.IsZero() {
		errs = append(errs, requireTime("before", p.Before))
		before = p.Before.UnixMilli()
	}
	if p.After != nil {
		errs = append(errs, p.After.validate())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	list := ListByStateParams{State: p.State, ConnectorName: p.ConnectorName, OwnerDID: p.OwnerDID, AccountKey: p.AccountKey}
	var after *models.Operation
	if p.After != nil {
		after = &models.Operation{CallerDID: p.After.CallerDID, OperationID: p.After.OperationID, Seq: p.After.Seq}
	}
	lister := func(ctx context.Context, from *models.Operation, limit int) ([]models.Operation, error) {
		lp := list
		lp.Limit = limit
		if from != nil {
			lp.After = &ListCursor{OperationKey: OperationKey{CallerDID: from.CallerDID, OperationID: from.OperationID}, Seq: from.Seq}
		}
		var rows []models.Operation
		err := r.withPlanSettings(ctx, claimPlan, func(tx *gorm.DB) error {
			var err error
			rows, err = r.WithTx(tx).listPage(ctx, lp)
			return err
		})
		return rows, err
	}
	apply := func(ctx context.Context, ops []*models.Operation) ([]models.Operation, error) {
		keys := make([][]any, len(ops))
		for i, op := range ops {
			keys[i] = []any{op.CallerDID, op.OperationID}
		}
		var rows []models.Operation
		q := r.scanOps(r.conn(ctx), &rows).Clauses(clause.Returning{}).
			Where("(caller_did, operation_id) IN ?", keys).Scopes(scopes.State(p.State))
		if err := guard(q).Updates(set).Error; err != nil {
			return nil, fmt.Errorf("%s: %w", action, err)
		}
		changed := make([]*models.Operation, len(rows))
		for i := range rows {
			changed[i] = &rows[i]
		}
		// A requeue brings its accounts work; a cancel frees no slot (it
		// never takes a live lease).
		if err := r.wakeFlow(ctx, changed, nil); err != nil {
			r.log.WarnContext(ctx, "connstore: waking the accounts after "+action+" failed", "err", err)
		}
		return rows, nil
	}
	res, err := bulk.Run(ctx, bulk.Params{Limit: p.Limit, DryRun: p.DryRun, Before: before, Held: held}, after, lister, apply)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	out := &BulkResult{Result: res}
	if res.Next != nil {
		out.Next = CursorAfter(res.Next)
	}
	return out, nil
}
