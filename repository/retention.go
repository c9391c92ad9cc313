package repository

import (
	"context"

	"fmt"
	"github.com/connstore/connstore/models"
	"strings"
	"time"
)

// CollectParams bounds one retention pass.
type CollectParams struct {
	// Before is the cutoff: only rows last written before it are collected.
	Before time.Time
	// Limit is the most rows one pass deletes; it must be positive.
	Limit int
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

// collectableSQL is the keep rule over candidate rows o, in one DELETE
// (built in CollectFinishedOperations) whose keep rule and delete see the
// same rows, so neither two batches nor two concurrent cleanups can each
// take another row to be the newest. A row is collected only while a newer
// row of its kind exists in the same partition; the newest never has one, and
// operations never leave a terminal state, so it is never collected.
var collectableSQL = strings.Join([]string{
	`o.state IN ('committed', 'dead') AND o.updated_at < @before
		AND (o.lease_token IS NULL OR o.lease_expires_at < @now)
		AND (o.document_id IS NULL OR (`,
	// Not the newest commit of its caller, nor of its owner: the latest
	// commit bounds which older rows still count.
	`(o.state <> 'committed' OR ` + newerExists("caller_did", "'committed'") + `)`,
	`AND (o.state <> 'committed' OR ` + newerExists("owner_did", "'committed'") + `)`,
	// Not the newest finished row of its caller, nor of its owner: the newest
	// one decides whether the document shows a failure.
	`AND ` + newerExists("caller_did", "'committed', 'dead'"),
	`AND ` + newerExists("owner_did", "'committed', 'dead'"),
	`))`,
}, "\n")

// recheckSQL is the DELETE's re-check on the row being deleted: a row
// leased or written between the candidate read and the delete (Postgres,
// READ COMMITTED) is kept.
const recheckSQL = `updated_at < @before AND (lease_token IS NULL OR lease_expires_at < @now)`

// CollectFinishedOperations deletes up to Limit finished operations that
// later rows supersede, oldest updated_at first, and returns how many it
// deleted. Committed and dead rows last written before Before, with no live
// lease, are collected when linked to no document, or when each is neither
// the newest commit nor the newest finished row of its caller and of its
// owner on that document. It fails closed: a bad cutoff or limit deletes
// nothing.
func (r *Repository) CollectFinishedOperations(ctx context.Context, p CollectParams) (_ int64, err error) {
	ctx, end := r.start(ctx, "CollectFinishedOperations")
	defer end(&err)
	if err := requireTime("before", p.Before); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	if err := requireLimit(p.Limit); err != nil {
		return 0, fmt.Errorf("collect finished operations: %w", err)
	}
	args := map[string]any{"before": p.Before.UnixMilli(), "now": r.leaseNow()}
	// Unqualified scope columns name o in the candidate read and the deleted
	// row in the DELETE, so the repository's scopes bound both.
	candidates := r.conn(ctx).Table("kubun_connector_operation AS o").Select("o.caller_did, o.operation_id").
		Where(collectableSQL, args).Order("o.updated_at, o.caller_did, o.operation_id").Limit(p.Limit)
	tx := r.conn(ctx).Where("(caller_did, operation_id) IN (?)", candidates).Where(recheckSQL, args).
		Delete(&models.Operation{})
	if tx.Error != nil {
		return 0, fmt.Errorf("collect finished operations: %w", tx.Error)
	}
	if tx.RowsAffected > 0 {
		r.emit(ctx, EventCollected, tx.RowsAffected, "")
	}
	return tx.RowsAffected, nil
}
