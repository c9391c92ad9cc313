package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/plugin/dbresolver"
)

// CollectParams bounds one retention pass.
type CollectParams struct {
	// Before is the cutoff: only rows last written before it are collected.
	Before time.Time
	// Limit is the most rows one pass deletes; it must be positive.
	Limit int
	// Cursor names the retention state a pass resumes from (when the
	// previous pass of that name began); empty means "operations". Passes
	// through repositories with different scopes should use different names,
	// so one tenant's pass does not move another's.
	Cursor string
}

// newerExists is "a newer operation of states on the same document with the
// same column (caller or owner) as o", newer by (created_at, caller_did,
// operation_id).
func newerExists(column, states string) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM kubun_connector_operation n
		WHERE n.document_id = o.document_id AND n.%[1]s = o.%[1]s AND n.state IN (%[2]s)
		AND (n.created_at > o.created_at
			OR (n.created_at = o.created_at AND n.caller_did > o.caller_did)
			OR (n.created_at = o.created_at AND n.caller_did = o.caller_did AND n.operation_id > o.operation_id)))`,
		column, states)
}

// eligibleSQL is a finished row o written before the cutoff with no live
// lease: the rows the keep rules judge.
const eligibleSQL = `o.state IN ('committed', 'dead') AND o.updated_at < @before
	AND (o.lease_token IS NULL OR o.lease_expires_at < @now)`

// supersededSQL is the seed's keep rule for a row on a document: a row is
// collected only while newer rows of its kind exist on the same document.
// The seed's rule is four conditions on every row: not the newest commit of
// its caller, nor of its owner (for a commit: the latest commit bounds which
// older rows still count), and not the newest finished row of its caller,
// nor of its owner (the newest one decides whether the document shows a
// failure). A newer commit is a newer finished row, so for a commit the
// first two imply the last two, and for a dead row the first two hold by
// themselves: each row needs only the two probes of its state's branch.
var supersededSQL = `CASE WHEN o.state = 'committed'
	THEN ` + newerExists("caller_did", "'committed'") + `
		AND ` + newerExists("owner_did", "'committed'") + `
	ELSE ` + newerExists("caller_did", "'committed', 'dead'") + `
		AND ` + newerExists("owner_did", "'committed', 'dead'") + `
	END`

// collectableSQL picks the rows one DELETE collects: unheld, eligible, and
// linked to no document or superseded on it. Keep rule and delete are one
// statement, so neither two batches nor two concurrent cleanups can each
// take another row to be the newest; the newest of a partition never has a
// newer row, and operations never leave a terminal state, so it is never
// collected.
var collectableSQL = `o.retention_hold IS NULL AND ` + eligibleSQL +
	` AND (o.document_id IS NULL OR (` + supersededSQL + `))`

// keptSQL picks the rows a pass marks held: unheld rows the keep rules keep
// now (eligible but not superseded on their document), and reconcile-only
// rows, which are never collected.
var keptSQL = `o.retention_hold IS NULL AND o.updated_at < @before AND (o.state = 'reconcile_only' OR (` +
	eligibleSQL + ` AND o.document_id IS NOT NULL AND NOT (` + supersededSQL + `)))`

// recheckSQL is the DELETE's re-check on the row being deleted: a row
// leased or written between the candidate read and the delete (Postgres,
// READ COMMITTED) is kept.
const recheckSQL = `updated_at < @before AND (lease_token IS NULL OR lease_expires_at < @now)`

// defaultCursor names the retention state of passes that name none.
const defaultCursor = "operations"

// CollectFinishedOperations deletes up to Limit finished operations that
// later rows supersede, oldest updated_at first, and returns how many it
// deleted. Committed and dead rows last written before Before, with no live
// lease, are collected when linked to no document, or when each is neither
// the newest commit nor the newest finished row of its caller and of its
// owner on that document. It fails closed: a bad cutoff or limit deletes
// nothing.
//
// A pass costs what it deletes, not what the table keeps. A row the keep
// rules keep is marked held (retention_hold) once, and the DELETE's
// candidate scan skips held rows through an index. A held row can only
// become collectable when a newer row on its document finishes, so each pass
// first clears the marks on the documents of rows finished since the last
// pass (kubun_connector_retention remembers when that was). Which rows a pass
// deletes is exactly what the keep rules say over the whole table. A row
// finished with an updated_at before the previous pass's clock (instances'
// clocks disagreeing) leaves its document's marks until the next finish on
// it: that delays a collection, never makes one wrong.
func (r *Repository) CollectFinishedOperations(ctx context.Context, p CollectParams) (_ int64, err error) {
	ctx, end := r.start(ctx, "CollectFinishedOperations")
	defer end(&err)
	if err := requireTime("before", p.Before); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if err := errors.Join(requireLimit(p.Limit), requireText("collect", p)); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if p.Cursor == "" {
		p.Cursor = defaultCursor
	}
	if err := requireKeys("cursor", p.Cursor); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	var n int64
	// Unscoped: the pass's own statements apply the scopes where they belong
	// (the retention state is the store's, not a tenant's).
	// The keep rules' subplans make the planner's estimates large enough to
	// JIT-compile a statement that runs in milliseconds.
	err = r.withPlanSettings(ctx, []planSetting{{"jit", "off"}}, func(tx *gorm.DB) error {
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

// collectPass is one pass inside its transaction: release the holds that
// newer finishes broke, delete, hold what the DELETE passed over, and
// record the pass.
func (r *Repository) collectPass(ctx context.Context, p CollectParams) (int64, error) {
	passStart := r.nowMillis()
	if err := r.releaseHolds(ctx, p.Cursor); err != nil {
		return 0, err
	}
	args := map[string]any{"before": p.Before.UnixMilli(), "now": r.leaseNow()}
	// Unqualified scope columns name o in the candidate read and the deleted
	// row in the DELETE, so the repository's scopes bound both.
	candidates := r.conn(ctx).Table("kubun_connector_operation AS o").Select("o.caller_did, o.operation_id").
		Where(collectableSQL, args).Order(collectOrder).Limit(p.Limit)
	var gone []models.Operation
	tx := r.conn(ctx).Clauses(clause.Returning{Columns: []clause.Column{{Name: "updated_at"}, {Name: "caller_did"},
		{Name: "operation_id"}}}).Where("(caller_did, operation_id) IN (?)", candidates).Where(recheckSQL, args).Delete(&gone)
	if tx.Error != nil {
		return 0, tx.Error
	}
	// Every unheld row the DELETE passed over on its way to the last row it
	// took is one the keep rules keep; a DELETE that took fewer than Limit
	// passed over all of them.
	var through *models.Operation
	if len(gone) == p.Limit {
		last := slices.MaxFunc(gone, collectCmp)
		through = &last
	}
	if err := r.hold(ctx, args, p, through, passStart); err != nil {
		return 0, err
	}
	return int64(len(gone)), nil
}

// collectOrder is the order retention takes rows in; its leading column is
// constant (NULL) among candidates, so the unheld index yields it.
const collectOrder = "o.retention_hold, o.updated_at, o.caller_did, o.operation_id"

// collectCmp orders rows as collectOrder does.
func collectCmp(a, b models.Operation) int {
	return cmp.Or(cmp.Compare(a.UpdatedAt, b.UpdatedAt), strings.Compare(a.CallerDID, b.CallerDID),
		strings.Compare(a.OperationID, b.OperationID))
}

// releaseHolds clears the holds on the documents of rows finished since
// the previous pass of this cursor began: their older rows may be
// superseded now. Documents are read a page at a time, so a pass costs what
// finished since, and the common case (nothing) is one index probe.
func (r *Repository) releaseHolds(ctx context.Context, cursor string) error {
	// The retention state is the store's bookkeeping, shared by every
	// scope: read it unscoped, from the primary.
	var since []int64
	err := r.base(ctx).Clauses(dbresolver.Write).Model(&models.RetentionState{}).Where("name = ?", cursor).
		Limit(1).Pluck("finished_through", &since).Error
	if err != nil || len(since) == 0 {
		return err
	}
	after := ""
	for {
		var docs []string
		err := r.conn(ctx).Model(&models.Operation{}).Distinct("document_id").
			Where("state IN ? AND updated_at >= ? AND document_id > ?",
				[]string{models.OperationCommitted, models.OperationDead}, since[0], after).
			Order("document_id").Limit(holdPage).Pluck("document_id", &docs).Error
		if err != nil || len(docs) == 0 {
			return err
		}
		err = hooks.SkipLock(r.conn(ctx)).Model(&models.Operation{}).
			Where("retention_hold IS NOT NULL AND document_id IN ?", docs).UpdateColumn("retention_hold", nil).Error
		if err != nil || len(docs) < holdPage {
			return err
		}
		after = docs[len(docs)-1]
	}
}

// holdPage is the documents one hold release reads and updates at once.
const holdPage = 1000

// hold marks the rows the keep rules keep now (those up to through, or the
// first 4×Limit when the DELETE ran out of candidates) and records the
// pass, so the next one knows which finishes to look at. The marks are
// bookkeeping, not a write of the row: no version bump, no updated_at.
func (r *Repository) hold(ctx context.Context, args map[string]any, p CollectParams, through *models.Operation, passStart int64) error {
	kept := r.conn(ctx).Table("kubun_connector_operation AS o").Select("o.caller_did, o.operation_id").
		Where(keptSQL, args).Order(collectOrder).Limit(4 * p.Limit)
	if through != nil {
		kept = kept.Where("(o.updated_at, o.caller_did, o.operation_id) < (?, ?, ?)",
			through.UpdatedAt, through.CallerDID, through.OperationID)
	}
	err := hooks.SkipLock(r.conn(ctx)).Model(&models.Operation{}).
		Where("(caller_did, operation_id) IN (?)", kept).UpdateColumn("retention_hold", 1).Error
	if err != nil {
		return err
	}
	return r.base(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "name"}},
		DoUpdates: clause.Assignments(map[string]any{"finished_through": gorm.Expr(
			"CASE WHEN excluded.finished_through > kubun_connector_retention.finished_through " +
				"THEN excluded.finished_through ELSE kubun_connector_retention.finished_through END")}),
	}).Create(&models.RetentionState{Name: p.Cursor, FinishedThrough: passStart}).Error
}
