package retention

import (
	"slices"

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
	// window of rows to judge is read, and the rows it collects deleted,
	// through it.
	Scoped func() *gorm.DB
	// Base is the same transaction without scopes: the pass lock, the
	// release of holds and the holds (a release is the store's, not a
	// tenant's; a hold takes out entries the scoped window picked).
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
	// Released is where in the pass order the rows a release puts back take
	// their place (epoch milliseconds): the application's now, or just
	// before the cutoff when that is earlier, so this pass may judge them.
	Released int64
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
	// The window: the first Budget × Limit rows to judge in pass order, read
	// from the table of finished rows not held (its primary key, or its
	// owner index under a scope naming an owner), with the repository's
	// scopes; the keep rules' probes look across them, as the seed's rules
	// do. Its size is written into the statement, so a generic plan knows
	// it.
	entries := func() *gorm.DB {
		q := p.Scoped().Model(&models.RetentionPending{}).Select(store.EntryColumns+p.Dialect.RowIDColumns("")).
			Where(store.Waiting, args).Order(store.EntryKey)
		return p.Dialect.FixedLimit(q, Budget*p.Limit)
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
	picked := func(window *gorm.DB, where string, limit int, partitioned bool, key string) (string, []any) {
		sel := func(pick string) *gorm.DB {
			q := p.Base().Table(store.Window, window).Select(pick).Where(where)
			if limit > 0 {
				q = q.Order(store.WindowOrder).Limit(limit)
			}
			return q
		}
		return p.Dialect.PickRows(partitioned, key, sel)
	}
	judged := func() *gorm.DB {
		return p.Base().Table(store.JudgedRows(), entries()).Select(store.JudgedColumns+p.Dialect.RowIDColumns("j")).
			Where(store.Unleased, args)
	}
	key, candidates := picked(judged(), store.CollectableInWindow, p.Limit, partitioned, "caller_did, operation_id")
	var gone []models.Operation
	tx := p.Scoped().Clauses(clause.Returning{Columns: []clause.Column{{Name: "caller_did"}}}).
		Where(key, candidates...).Where(store.Recheck, args).Delete(&gone)
	if tx.Error != nil {
		return 0, tx.Error
	}
	// The deleted rows' entries went with them (a trigger). The window
	// again, after the delete: the rows in it the keep rules keep are held,
	// their entries moved to the held rows, so the next pass's window begins
	// after them; collectable rows the limit left, and rows under a live
	// lease, stay, first in line. (The window now reaches up to Limit
	// entries further than the delete's did: those are judged here too, and
	// held or left.) The keep rules run once, in the first statement; the
	// second takes out the entries of what it held, and stale entries.
	// A row can have two entries (one a release placed, one a trigger wrote
	// when the row changed and changed back): held once.
	kept := p.Base().Table(store.Window, judged()).Select("DISTINCT " + store.HeldColumns).Where(store.KeptInWindow)
	if err := store.Hold(p.Base(), kept); err != nil {
		return 0, err
	}
	withRows := p.Base().Table(store.EntryRows(), entries()).Select(store.EntryRowColumns + p.Dialect.RowIDColumns("e"))
	key, settled := picked(withRows, store.Settled, 0, false, store.EntryKey)
	if err := p.Base().Where(key, settled...).Delete(&models.RetentionPending{}).Error; err != nil {
		return 0, err
	}
	return int64(len(gone)), nil
}

// Budget is how many rows one pass examines per row it may delete: a pass
// reads a window of at most Budget × Limit unheld rows (and, when it holds,
// up to Limit more), whatever the journal's size or shape.
const Budget = 4

// lockNamespace is the first key of the advisory lock retention passes
// take turns on ("rete"); the second is the schema's hash.
const lockNamespace = 0x72657465

// release consumes the queue of documents on which a row finished and
// moves those documents' held rows back among the rows to judge, a page at
// a time, unscoped (the queue and a document's holds are the
// store's, not a tenant's). It costs what finished since the last pass;
// nothing finished is one probe.
func (p Pass) release() error {
	for {
		docs, err := store.ConsumeFinished(p.Base(), holdPage)
		if err != nil || len(docs) == 0 {
			return err
		}
		taken := len(docs)
		slices.Sort(docs)
		docs = slices.Compact(docs)
		if err := store.Release(p.Base(), docs, p.Released); err != nil || taken < holdPage {
			return err
		}
	}
}

// holdPage is the queue entries one release consumes at once.
const holdPage = 1000
