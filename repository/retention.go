package repository

import (
	"context"
	"errors"
	"fmt"
	"github.com/connstore/connstore/internal/dialect"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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

// newerExists is "a newer operation of states on the same document with the
// same column (caller or owner) as o", newer by (created_at, caller_did,
// operation_id). The state is compared as an expression (concatenated with
// an empty string) so no index on state can serve the probe: a planner
// without statistics chose one and read every committed row per probe, a
// million rows for each of the window's; the document indexes are the
// probe's only way in.
func newerExists(column, states string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM kubun_connector_operation n
		WHERE n.document_id = o.document_id AND n.%[1]s = o.%[1]s AND n.state || '' IN (%[2]s)
		AND (n.created_at > o.created_at
			OR (n.created_at = o.created_at AND n.caller_did > o.caller_did)
			OR (n.created_at = o.created_at AND n.caller_did = o.caller_did AND n.operation_id > o.operation_id)))`,
		column, states)
}

// supersededSQL is the seed's keep rule for a row on a document: a row is
// collected only while newer rows of its kind exist on the same document.
// The seed's rule is four conditions on every row: not the newest commit of
// its caller, nor of its owner (for a commit: the latest commit bounds which
// older rows still count), and not the newest finished row of its caller,
// nor of its owner (the newest one decides whether the document shows a
// failure). A newer commit is a newer finished row, so for a commit the
// first two imply the last two, and for a dead row the first two hold by
// themselves: each row needs only the two probes of its state's branch.
var supersededSQL = `CASE WHEN o.state = ` + sqlStrings(models.OperationCommitted) + `
	THEN ` + newerExists("caller_did", sqlStrings(models.OperationCommitted)) + `
		AND ` + newerExists("owner_did", sqlStrings(models.OperationCommitted)) + `
	ELSE ` + newerExists("caller_did", finishedStatesSQL) + `
		AND ` + newerExists("owner_did", finishedStatesSQL) + `
	END`

// finishedStatesSQL lists the states retention collects, as SQL.
var finishedStatesSQL = sqlStrings(models.OperationCommitted, models.OperationDead)

// sqlStrings renders constants as a list of SQL string literals: the
// predicates name states from the models constants, never as retyped text.
// The values are the package's own constants, never input.
func sqlStrings(values ...string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return strings.Join(quoted, ", ")
}

// judgedSQL is the rows a pass judges: unheld finished rows written before
// the cutoff with no live lease. Its first two terms are the predicate of
// the partial index kubun_connector_operation_collect_idx, written as the
// index writes them so both databases read the index in pass order.
var judgedSQL = `retention_hold IS NULL AND state IN (` + finishedStatesSQL + `) AND updated_at < @before
	AND (lease_token IS NULL OR lease_expires_at < @now)`

// judgedColumns are the columns the keep rules read from a judged row.
const judgedColumns = "caller_did, operation_id, owner_did, document_id, state, created_at, updated_at"

// keptInWindowSQL picks, among a window of judged rows o, those the keep
// rules keep now: linked to a document and not superseded on it.
var keptInWindowSQL = `o.document_id IS NOT NULL AND NOT (` + supersededSQL + `)`

// collectableInWindowSQL picks, among a window of judged rows o, those the
// keep rules collect: linked to no document, or superseded on it.
var collectableInWindowSQL = `o.document_id IS NULL OR (` + supersededSQL + `)`

// CollectBudget is how many judged rows one pass examines per row it may
// delete: a pass reads at most CollectBudget × Limit unheld rows, whatever
// the journal's size or shape.
const CollectBudget = 4

// recheckSQL is the DELETE's re-check on the row being deleted: a row
// leased or written between the candidate read and the delete (Postgres,
// READ COMMITTED) is kept, and whatever picked it, a row that is not an
// unheld finished row is never deleted. Those two terms are written so no
// index matches them (a planner that took the judged-rows index for them
// read the whole journal instead of the picked rows by id).
var recheckSQL = `updated_at < @before AND (lease_token IS NULL OR lease_expires_at < @now)
	AND COALESCE(retention_hold, 0) = 0 AND state || '' IN (` + finishedStatesSQL + `)`

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
		n, err = r.WithTx(tx).collectPass(ctx, p)
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

// collectPass is one pass inside its transaction: take the pass lock,
// release the holds finishes broke, delete within the window, hold what the
// window keeps.
func (r *Repository) collectPass(ctx context.Context, p CollectParams) (int64, error) {
	// The pass lock, and whether the journal is partitioned, in one round
	// trip.
	partitioned, err := r.dialect.XactLockPartitioned(r.base(ctx), retentionLockNamespace, "kubun_connector_operation")
	if err != nil {
		return 0, err
	}
	if err := r.releaseFinished(ctx); err != nil {
		return 0, err
	}
	args := map[string]any{"before": p.Before.UnixMilli(), "now": r.leaseNow()}
	// The window carries the repository's scopes; the keep rules' probes
	// look across them, as the seed's rules do.
	window := func() *gorm.DB {
		// Without statistics SQLite would prefer the state index and sort
		// every judged row.
		q := r.dialect.ReadIndex(r.conn(ctx).Model(&models.Operation{}), "kubun_connector_operation",
			"kubun_connector_operation_collect_idx")
		return q.Select(judgedColumns+r.dialect.RowIDColumns()).Where(judgedSQL, args).Order(collectOrder).Limit(CollectBudget * p.Limit)
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
			q := r.base(ctx).Table("(?) AS o", window()).Select(pick).Where(where)
			if limit > 0 {
				q = q.Order("o.updated_at, o.caller_did, o.operation_id").Limit(limit)
			}
			return q
		}
		return r.dialect.PickRows(partitioned, "caller_did, operation_id", sel)
	}
	key, candidates := picked(collectableInWindowSQL, p.Limit)
	var gone []models.Operation
	tx := r.conn(ctx).Clauses(clause.Returning{Columns: []clause.Column{{Name: "caller_did"}}}).
		Where(key, candidates...).Where(recheckSQL, args).Delete(&gone)
	if tx.Error != nil {
		return 0, tx.Error
	}
	// The window again, after the delete: every row in it the keep rules
	// keep is held, so the next pass's window begins after it. Rows the
	// rules would collect but the limit left stay unheld, first in line.
	key, kept := picked(keptInWindowSQL, 0)
	err = hooks.SkipLock(r.base(ctx)).Model(&models.Operation{}).Where(key, kept...).UpdateColumn("retention_hold", 1).Error
	if err != nil {
		return 0, err
	}
	return int64(len(gone)), nil
}

// retentionLockNamespace is the first key of the advisory lock retention
// passes take turns on ("rete"); the second is the schema's hash.
const retentionLockNamespace = 0x72657465

// collectOrder is the order passes judge rows in: the partial index's.
const collectOrder = "updated_at, caller_did, operation_id"

// releaseFinished consumes the queue of documents on which a row finished
// and clears the holds on them, a page at a time, unscoped (the queue and a
// document's holds are the store's, not a tenant's). It costs what
// finished since the last pass; nothing finished is one probe.
func (r *Repository) releaseFinished(ctx context.Context) error {
	for {
		var docs []string
		err := r.base(ctx).Raw(`DELETE FROM kubun_connector_retention_finished WHERE seq IN
			(SELECT seq FROM kubun_connector_retention_finished ORDER BY seq LIMIT ?) RETURNING document_id`, holdPage).
			Scan(&docs).Error
		if err != nil || len(docs) == 0 {
			return err
		}
		taken := len(docs)
		slices.Sort(docs)
		docs = slices.Compact(docs)
		err = hooks.SkipLock(r.base(ctx)).Model(&models.Operation{}).
			Where("retention_hold IS NOT NULL AND document_id IN ?", docs).UpdateColumn("retention_hold", nil).Error
		if err != nil || taken < holdPage {
			return err
		}
	}
}

// holdPage is the queue entries one release consumes at once.
const holdPage = 1000
