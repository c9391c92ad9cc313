package retention

import (
	"slices"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Pass is one retention pass, run inside its own transaction: Scoped and
// Base are that transaction, with and without the caller's scopes.
type Pass struct {
	// Scoped is the pass's transaction with the repository's scopes: the
	// window of judged rows is read and deleted through it.
	Scoped func() *gorm.DB
	// Base is the same transaction without scopes: the pass lock, the
	// release of holds and the hold marks (a release is the store's, not a
	// tenant's; the marks name rows the scoped window picked).
	Base func() *gorm.DB
	// Dialect renders what differs between the databases.
	Dialect dialect.Dialect
	// Before is the cutoff, epoch milliseconds: only rows last written
	// before it are judged.
	Before int64
	// Now is the lease clock's now: epoch milliseconds, or an expression.
	Now any
	// Limit is the most rows the pass deletes.
	Limit int
}

// Run takes the pass lock, releases the holds finishes broke, deletes
// within the window what the keep rules collect, and holds what they keep.
// It returns the rows deleted.
func (p Pass) Run() (int64, error) {
	// The pass lock, and whether the journal is partitioned, in one round
	// trip.
	partitioned, err := p.Dialect.XactLockPartitioned(p.Base(), lockNamespace, "kubun_connector_operation")
	if err != nil {
		return 0, err
	}
	if err := p.release(); err != nil {
		return 0, err
	}
	args := map[string]any{"before": p.Before, "now": p.Now}
	// The window carries the repository's scopes; the keep rules' probes
	// look across them, as the seed's rules do.
	window := func() *gorm.DB {
		// Without statistics SQLite would prefer the state index and sort
		// every judged row.
		q := p.Dialect.ReadIndex(p.Scoped().Model(&models.Operation{}), "kubun_connector_operation",
			"kubun_connector_operation_collect_idx")
		return q.Select(store.JudgedColumns+p.Dialect.RowIDColumns()).Where(store.Judged, args).Order(store.CollectOrder).Limit(Budget * p.Limit)
	}
	// Which rows the statements below change is decided once per statement:
	// on PostgreSQL by the physical ids their window picks (an array the
	// statement computes once, read by TID), so no plan can re-run the window
	// per row of the table however lagging its statistics (one that did
	// joined the whole table against it). A row changed by another writer
	// meanwhile has moved and is left alone, to be judged again next pass.
	// A physical id is only unique within one heap: on a partitioned journal
	// every partition has a row (0,1), so there the partition's oid must
	// match too (the ids drive the scan; the (oid, id) pairs, a second
	// reading of the window, filter what it finds).
	picked := func(where string, limit int) (string, []any) {
		sel := func(pick string) *gorm.DB {
			q := p.Base().Table(store.Window, window()).Select(pick).Where(where)
			if limit > 0 {
				q = q.Order(store.WindowOrder).Limit(limit)
			}
			return q
		}
		return p.Dialect.PickRows(partitioned, "caller_did, operation_id", sel)
	}
	key, candidates := picked(store.CollectableInWindow, p.Limit)
	var gone []models.Operation
	tx := p.Scoped().Clauses(clause.Returning{Columns: []clause.Column{{Name: "caller_did"}}}).
		Where(key, candidates...).Where(store.Recheck, args).Delete(&gone)
	if tx.Error != nil {
		return 0, tx.Error
	}
	// The window again, after the delete: every row in it the keep rules
	// keep is held, so the next pass's window begins after it. Rows the
	// rules would collect but the limit left stay unheld, first in line.
	key, kept := picked(store.KeptInWindow, 0)
	err = hooks.SkipLock(p.Base()).Model(&models.Operation{}).Where(key, kept...).UpdateColumn("retention_hold", 1).Error
	if err != nil {
		return 0, err
	}
	return int64(len(gone)), nil
}

// Budget is how many judged rows one pass examines per row it may delete:
// a pass reads at most Budget × Limit unheld rows, whatever the journal's
// size or shape.
const Budget = 4

// lockNamespace is the first key of the advisory lock retention passes
// take turns on ("rete"); the second is the schema's hash.
const lockNamespace = 0x72657465

// release consumes the queue of documents on which a row finished
// and clears the holds on them, a page at a time, unscoped (the queue and a
// document's holds are the store's, not a tenant's). It costs what
// finished since the last pass; nothing finished is one probe.
func (p Pass) release() error {
	for {
		docs, err := store.ConsumeFinished(p.Base(), holdPage)
		if err != nil || len(docs) == 0 {
			return err
		}
		taken := len(docs)
		slices.Sort(docs)
		docs = slices.Compact(docs)
		err = hooks.SkipLock(p.Base()).Model(&models.Operation{}).
			Where(store.HeldOn(docs)).UpdateColumn("retention_hold", nil).Error
		if err != nil || taken < holdPage {
			return err
		}
	}
}

// holdPage is the queue entries one release consumes at once.
const holdPage = 1000
