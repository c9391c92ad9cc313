package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// Default batch sizes of ListDueOperations.
const (
	DefaultWinnerChunkSize = 500
	DefaultDuePageSize     = 1000
)

var (
	operationKey = []string{"caller_did", "operation_id"}
	watchKey     = []string{"owner_did", "connector_name", "model", "account_key", "source_id"}
	scheduleKey  = append([]string{"next_attempt_at"}, watchKey...)
)

// ReadWinnerFunc returns the current winner digest of a document; ok false
// (or an error) means it has no readable winner, and the watch is skipped.
type ReadWinnerFunc func(ctx context.Context, documentID string) (digest string, ok bool, err error)

// ReadWinnersFunc returns the winner digests of a batch of documents; a
// document absent from the map has no readable winner. An error aborts.
type ReadWinnersFunc func(ctx context.Context, documentIDs []string) (map[string]string, error)

// DueParams configures ListDueOperations. One of ReadWinner or ReadWinners
// is required; ReadWinners wins when both are set.
type DueParams struct {
	// Now is the sweep's time; required.
	Now time.Time
	// ReadWinner reads one document's winner digest.
	ReadWinner ReadWinnerFunc
	// ReadWinners reads a chunk of documents' winner digests in one call.
	ReadWinners ReadWinnersFunc
	// ChunkSize is the number of documents per ReadWinners call; 0 means
	// DefaultWinnerChunkSize.
	ChunkSize int
	// PageSize is the number of rows per query; 0 means DefaultDuePageSize.
	PageSize int
}

// DueWork is what a boot or periodic sweep must act on.
type DueWork struct {
	// Operations are attempted operations whose re-drive is due.
	Operations []models.Operation
	// Watches are the SCHEDULE branch, then AUDIT-branch divergences, once each.
	Watches []models.ProjectionWatch
}

// ListDueOperations returns the due operations and due or diverged watches.
// Operations: state attempted, next_attempt_at NULL or <= Now. Watches: the
// SCHEDULE branch (not verified, scheduled at or before Now) ∪ the AUDIT
// branch (verified or repair_failed, whose current winner differs from both
// verified_state_digest and observed_winner_digest). The AUDIT branch is not
// filtered on next_attempt_at: verified and exhausted rows have it cleared,
// and they are exactly the rows it exists to reopen. Winners are read with
// no transaction held open, one call per chunk with ReadWinners. Every table
// is read in keyset pages.
func (r *Repository) ListDueOperations(ctx context.Context, p DueParams) (*DueWork, error) {
	if err := p.normalize(); err != nil {
		return nil, fmt.Errorf("list due operations: %w", err)
	}
	work := &DueWork{}
	db := r.conn(ctx)
	err := eachPage(ctx, func() *gorm.DB {
		return db.Scopes(scopes.State(models.OperationAttempted), scopes.Due(p.Now))
	}, operationKey, p.PageSize, func(o *models.Operation) []any { return []any{o.CallerDID, o.OperationID} },
		func(page []models.Operation) error { work.Operations = append(work.Operations, page...); return nil })
	if err != nil {
		return nil, fmt.Errorf("list due operations: %w", err)
	}
	err = eachPage(ctx, func() *gorm.DB { return db.Scopes(scopes.WatchScheduled(p.Now)) },
		scheduleKey, p.PageSize, scheduleCursor,
		func(page []models.ProjectionWatch) error { work.Watches = append(work.Watches, page...); return nil })
	if err != nil {
		return nil, fmt.Errorf("list due watches: %w", err)
	}
	if err := r.auditWatches(ctx, p, work); err != nil {
		return nil, fmt.Errorf("audit watches: %w", err)
	}
	return work, nil
}

func (p *DueParams) normalize() error {
	if err := requireTime("now", p.Now); err != nil {
		return err
	}
	if p.ReadWinner == nil && p.ReadWinners == nil {
		return invalid("one of ReadWinner or ReadWinners is required")
	}
	if p.ChunkSize < 0 || p.PageSize < 0 {
		return invalid("chunk size %d and page size %d must not be negative", p.ChunkSize, p.PageSize)
	}
	if p.ChunkSize == 0 {
		p.ChunkSize = DefaultWinnerChunkSize
	}
	if p.PageSize == 0 {
		p.PageSize = DefaultDuePageSize
	}
	return nil
}

func scheduleCursor(w *models.ProjectionWatch) []any {
	return []any{*w.NextAttemptAt, w.OwnerDID, w.ConnectorName, w.Model, w.AccountKey, w.SourceID}
}

func watchCursor(w *models.ProjectionWatch) []any {
	return []any{w.OwnerDID, w.ConnectorName, w.Model, w.AccountKey, w.SourceID}
}
