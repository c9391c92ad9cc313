package repository

import (
	"context"

	"github.com/connstore/connstore/internal/due"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// dueWatches reads every watch either branch may return in one keyset pass
// and sorts the rows into the branches as they are read (due.Audit): the
// SCHEDULE rows are emitted as they come and the AUDIT divergences a chunk
// at a time, so ReadWinners is called exactly ceil(candidates / ChunkSize)
// times. The identity key rows are read by is visited once, which is the
// seed's dedupe by identity.
func (r *Repository) dueWatches(ctx context.Context, p DueParams, emit func(DueItem) error) error {
	audit := &due.Audit{Now: p.Now.UnixMilli(), ChunkSize: p.ChunkSize,
		Winners: func(ctx context.Context, candidates []models.ProjectionWatch) (map[string]string, error) {
			return r.readWinners(ctx, p, candidates)
		},
		Scheduled: func(w *models.ProjectionWatch) error { return emit(DueItem{Kind: DueScheduled, Watch: w}) },
		Diverged:  func(w *models.ProjectionWatch) error { return emit(DueItem{Kind: DueDiverged, Watch: w}) },
	}
	db := r.conn(ctx)
	err := eachPage(ctx, func() *gorm.DB { return db.Scopes(scopes.WatchSweep(p.Now)) },
		watchKey, p.PageSize, watchCursor, func(page []models.ProjectionWatch) error { return audit.Page(ctx, page) })
	if err != nil {
		return err
	}
	return audit.Flush(ctx)
}

// readWinners reads the chunk's winners: one ReadWinners call, or one
// ReadWinner call per candidate, where an unreadable winner is left out.
func (r *Repository) readWinners(ctx context.Context, p DueParams, candidates []models.ProjectionWatch) (map[string]string, error) {
	ids := make([]string, len(candidates))
	for i, w := range candidates {
		ids[i] = w.DocumentID
	}
	if p.ReadWinners != nil {
		return p.ReadWinners(ctx, ids)
	}
	winners := make(map[string]string, len(ids))
	for _, id := range ids {
		digest, ok, err := p.ReadWinner(ctx, id)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil && ok {
			winners[id] = digest
		}
	}
	return winners, nil
}
