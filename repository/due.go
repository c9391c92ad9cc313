package repository

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// Default batch sizes of the due sweep.
const (
	DefaultWinnerChunkSize = 500
	DefaultDuePageSize     = 1000
)

var (
	operationKey = []string{"caller_did", "operation_id"}
	watchKey     = []string{"owner_did", "connector_name", "model", "account_key", "source_id"}
)

// ReadWinnerFunc returns the current winner digest of a document; ok false
// (or an error) means it has no readable winner, and the watch is skipped.
type ReadWinnerFunc func(ctx context.Context, documentID string) (digest string, ok bool, err error)

// ReadWinnersFunc returns the winner digests of a batch of documents; a
// document absent from the map has no readable winner. An error aborts.
type ReadWinnersFunc func(ctx context.Context, documentIDs []string) (map[string]string, error)

// DueParams configures the due sweep. One of ReadWinner or ReadWinners is
// required; ReadWinners wins when both are set.
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

// DueKind says why an item of the due sweep is due.
type DueKind int

// The kinds of due work.
const (
	// DueRedrive is an attempted operation whose re-drive is due.
	DueRedrive DueKind = iota + 1
	// DueScheduled is a watch whose own schedule is due (SCHEDULE branch).
	DueScheduled
	// DueDiverged is a settled watch whose winner moved (AUDIT branch).
	DueDiverged
)

// DueItem is one piece of due work: an operation (DueRedrive) or a watch.
type DueItem struct {
	Kind      DueKind
	Operation *models.Operation
	Watch     *models.ProjectionWatch
}

// DueWork is what a boot or periodic sweep must act on.
type DueWork struct {
	// Operations are attempted operations whose re-drive is due.
	Operations []models.Operation
	// Watches are the SCHEDULE branch, then AUDIT-branch divergences, once each.
	Watches []models.ProjectionWatch
}

// errStopped ends a sweep whose consumer stopped iterating.
var errStopped = errors.New("due sweep stopped")

// IterDue streams the due sweep: first the due operations (state attempted,
// next_attempt_at NULL or <= Now), then the due watches: the SCHEDULE branch
// (not verified, scheduled at or before Now) ∪ the AUDIT branch (verified or
// repair_failed, whose current winner differs from both
// verified_state_digest and observed_winner_digest). The AUDIT branch is not
// filtered on next_attempt_at: verified and exhausted rows have it cleared,
// and they are exactly the rows it exists to reopen.
//
// Both watch branches are read in one keyset pass over the watch identity,
// so each watch is read once, at one moment, and classified once: a watch
// that moves between branches while the sweep runs is yielded once, never
// twice and never skipped. Memory is bounded by PageSize rows plus
// ChunkSize audit candidates; winners are read between pages with no
// transaction held open. An error is yielded last and ends the sequence.
func (r *Repository) IterDue(ctx context.Context, p DueParams) iter.Seq2[DueItem, error] {
	return func(yield func(DueItem, error) bool) {
		ctx, end := r.start(ctx, "IterDue")
		var err error
		defer end(&err)
		err = r.eachDue(ctx, p, func(it DueItem) error {
			if !yield(it, nil) {
				return errStopped
			}
			return nil
		})
		if errors.Is(err, errStopped) {
			err = nil
		}
		if err != nil {
			yield(DueItem{}, err)
		}
	}
}

// ListDueOperations is IterDue collected into memory: every due operation,
// then the SCHEDULE watches, then the AUDIT divergences.
func (r *Repository) ListDueOperations(ctx context.Context, p DueParams) (_ *DueWork, err error) {
	ctx, end := r.start(ctx, "ListDueOperations")
	defer end(&err)
	work := &DueWork{}
	var diverged []models.ProjectionWatch
	err = r.eachDue(ctx, p, func(it DueItem) error {
		switch it.Kind {
		case DueRedrive:
			work.Operations = append(work.Operations, *it.Operation)
		case DueScheduled:
			work.Watches = append(work.Watches, *it.Watch)
		case DueDiverged:
			diverged = append(diverged, *it.Watch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	work.Watches = append(work.Watches, diverged...)
	return work, nil
}

func (r *Repository) eachDue(ctx context.Context, p DueParams, emit func(DueItem) error) error {
	if err := errors.Join(p.normalize(), requireText("due", p)); err != nil {
		return fmt.Errorf("list due operations: %w", err)
	}
	db := r.conn(ctx)
	err := eachPage(ctx, func() *gorm.DB {
		return db.Scopes(scopes.State(models.OperationAttempted), scopes.Due(p.Now))
	}, operationKey, p.PageSize, func(o *models.Operation) []any { return []any{o.CallerDID, o.OperationID} },
		func(page []models.Operation) error {
			for i := range page {
				if err := emit(DueItem{Kind: DueRedrive, Operation: &page[i]}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("list due operations: %w", err)
	}
	if err := r.dueWatches(ctx, p, emit); err != nil {
		return fmt.Errorf("list due watches: %w", err)
	}
	return nil
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

func watchCursor(w *models.ProjectionWatch) []any {
	return []any{w.OwnerDID, w.ConnectorName, w.Model, w.AccountKey, w.SourceID}
}
