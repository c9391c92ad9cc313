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
	// pass resumes after the rows earlier passes held (they left the rows
	// to judge), so scoped and unscoped passes, named or not, cannot move
	// each other past a finish.
	Cursor string
}

// CollectBudget is how many rows one pass examines per row it may delete:
// a pass reads a window of at most CollectBudget × Limit unheld rows (and,
// when it holds, up to Limit more), whatever the journal's size or shape.
const CollectBudget = retention.Budget

// CollectFinishedOperations deletes up to Limit finished operations that
// later rows supersede, in pass order (oldest updated_at first; rows a
// release put back, behind the rows waiting), and returns how many it
// deleted. Committed and dead rows last written before Before, with no live
// lease, are collected when linked to no document, or when each is neither
// the newest commit nor the newest finished row of its caller and of its
// owner on that document. It fails closed: a bad cutoff or limit deletes
// nothing.
//
// A pass costs the same on any journal. Triggers keep a table of the
// finished rows not yet judged (kubun_connector_retention_pending, migration
// 0017), in pass order: a row enters at its updated_at when it finishes or
// changes. A pass reads its window there: the first CollectBudget × Limit
// of them placed before the cutoff (under the repository's scopes, through
// the table's owner index for a scope naming an owner). It deletes, among
// the window's rows without a live lease, what the keep rules collect (up
// to Limit; the keep rule and the delete are one statement), then holds
// the rows they keep by moving their entries to the table of held rows by
// document (kubun_connector_retention_held, migration 0018), so the next
// pass's window starts after them. Rows the limit left and rows under a
// live lease stay, first in line. An unheld journal (just
// adopted or upgraded) drains in passes that each read the same number of
// rows, and holding a row moves a narrow entry, not a new version of the
// operation in the journal's indexes: a pass writes as much at a million
// rows as at ten thousand.
//
// A held row can only become collectable when a row on its document
// finishes later, or a finished row is linked to the document or changes a
// column the keep rules compare (its owner, say, by SQL). The writing
// statement's own transaction queues the document (a trigger, migrations
// 0013 and 0018), so the entry appears exactly when the write commits;
// every pass first consumes the queue and moves the held rows of its
// documents back among the rows to judge, reading those and nothing else,
// and places them at the pass's now (just before its cutoff, if that is
// earlier): behind the rows waiting already, so documents that keep
// getting finishes cannot keep the window on their kept rows while the
// rows behind them are never judged. It does so across every scope (a finish supersedes
// rows of any caller or owner on the document), then judges. Passes on
// PostgreSQL take turns on a transaction-scoped advisory lock (SQLite
// writers take turns anyway), so a pass never holds a row on knowledge
// another pass's release has already cleared, and concurrent passes cannot
// deadlock on the rows they change.
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
	err = r.withPlanSettings(ctx, passPlan, func(tx *gorm.DB) error {
		var err error
		in := r.WithTx(tx)
		n, err = retention.Pass{Scoped: func() *gorm.DB { return in.conn(ctx) }, Base: func() *gorm.DB { return in.base(ctx) },
			Dialect: in.dialect, Before: p.Before.UnixMilli(), Now: in.leaseNow(), Limit: p.Limit,
			Released: min(r.now().UnixMilli(), p.Before.UnixMilli()-1)}.Run()
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

// passPlan are the planner settings of a retention pass. Every statement of
// a pass reads a bounded number of rows by key: its window of entries in
// primary-key order, their operations by primary key, the keep rules'
// probes and the released documents by the document indexes, the entries
// and operations it changes by physical id. With statistics that lag the
// journal (a million rows inserted since the last ANALYZE) the planner
// judged a hash join against the whole journal cheaper than the window's
// probes, and read every row of it; with joins by hashing or merging and
// sequential scans off, it has only the probes to choose from. The keep
// rules' subplans also make its estimates large enough to JIT-compile a
// statement that runs in milliseconds.
var passPlan = []dialect.Setting{
	{Name: "jit", Value: "off"},
	{Name: "enable_seqscan", Value: "off"},
	{Name: "enable_hashjoin", Value: "off"},
	{Name: "enable_mergejoin", Value: "off"},
}
