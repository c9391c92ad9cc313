package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/retention"
	"gorm.io/gorm"
)

// CollectParams bounds one retention pass.
type CollectParams struct {
	// Before is the cutoff: only rows last written before it are collected.
	Before time.Time
	// Limit is the most rows one pass deletes; it must be positive.
	Limit int
	// Cursor is accepted for compatibility and validated as a key, but no
	// longer selects anything: passes keep no per-cursor state. Holds are
	// released from a queue every pass consumes whatever its scopes, and a
	// pass resumes after the rows earlier passes held, so scoped and
	// unscoped passes, named or not, cannot move each other past a finish.
	Cursor string
}

// CollectBudget is how many judged rows one pass examines per row it may
// delete: a pass reads at most CollectBudget × Limit unheld rows, whatever
// the journal's size or shape.
const CollectBudget = retention.Budget

// CollectFinishedOperations deletes up to Limit finished operations that
// later rows supersede, oldest updated_at first, and returns how many it
// deleted. Committed and dead rows last written before Before, with no live
// lease, are collected when linked to no document, or when each is neither
// the newest commit nor the newest finished row of its caller and of its
// owner on that document. It fails closed: a bad cutoff or limit deletes
// nothing.
//
// A pass costs the same on any journal. It examines a window of at most
// CollectBudget × Limit unheld finished rows in pass order (a partial index
// holds exactly those), deletes what the keep rules collect among them (up
// to Limit; the keep rule and the delete are one statement), and marks the
// ones they keep held (retention_hold), so the next pass's window starts
// after them: an unheld journal (just adopted or upgraded) drains in passes
// that each read the same number of rows, and a journal whose kept rows are
// held costs a pass only what finished since.
//
// A held row can only become collectable when a row on its document
// finishes later (or a finished row is linked to the document). The
// finishing statement's own transaction queues the document (a trigger,
// migration 0013), so the entry appears exactly when the finish commits;
// every pass first consumes the queue and clears the holds on its
// documents, across every scope (a finish supersedes rows of any caller or
// owner on the document), then judges. Passes on PostgreSQL take turns on a
// transaction-scoped advisory lock (SQLite writers take turns anyway), so a
// pass never holds a row on knowledge another pass's release has already
// cleared, and concurrent passes cannot deadlock on the rows they mark.
func (r *Repository) CollectFinishedOperations(ctx context.Context, p CollectParams) (_ int64, err error) {
	ctx, end := r.start(ctx, "CollectFinishedOperations")
	defer end(&err)
	if err := requireTime("before", p.Before); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if err := errors.Join(requireLimit(p.Limit), requireText("collect", p)); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if p.Cursor != "" {
		if err := requireKeys("cursor", p.Cursor); err != nil {
			return 0, fmt.Errorf("collect finished operations: %w", err)
		}
	}
	var n int64
	// The keep rules' subplans make the planner's estimates large enough to
	// JIT-compile a statement that runs in milliseconds.
	err = r.withPlanSettings(ctx, []dialect.Setting{{Name: "jit", Value: "off"}}, func(tx *gorm.DB) error {
		var err error
		in := r.WithTx(tx)
		n, err = retention.Pass{Scoped: func() *gorm.DB { return in.conn(ctx) }, Base: func() *gorm.DB { return in.base(ctx) },
			Dialect: in.dialect, Before: p.Before.UnixMilli(), Now: in.leaseNow(), Limit: p.Limit}.Run()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if n > 0 {
		r.emit(ctx, EventCollected, n, "")
	}
	return n, nil
}
