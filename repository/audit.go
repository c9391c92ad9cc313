package repository

import (
	"context"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// dueWatches reads every watch either branch may return in one keyset pass
// and emits the SCHEDULE rows as they come and the AUDIT divergences a chunk
// at a time, so ReadWinners is called exactly ceil(candidates / ChunkSize)
// times. A row is classified as it was read; the identity key it is read by
// is visited once, which is the seed's dedupe by identity.
func (r *Repository) dueWatches(ctx context.Context, p DueParams, emit func(DueItem) error) error {
	now := p.Now.UnixMilli()
	chunk := make([]models.ProjectionWatch, 0, p.ChunkSize)
	flush := func() error {
		diverged, err := r.diverged(ctx, p, chunk)
		for i := range diverged {
			if err == nil {
				err = emit(DueItem{Kind: DueDiverged, Watch: &diverged[i]})
			}
		}
		chunk = chunk[:0]
		return err
	}
	db := r.conn(ctx)
	err := eachPage(ctx, func() *gorm.DB { return db.Scopes(scopes.WatchSweep(p.Now)) },
		watchKey, p.PageSize, watchCursor, func(page []models.ProjectionWatch) error {
			for i := range page {
				if scheduled(&page[i], now) {
					if err := emit(DueItem{Kind: DueScheduled, Watch: &page[i]}); err != nil {
						return err
					}
					continue
				}
				if chunk = append(chunk, page[i]); len(chunk) == p.ChunkSize {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return nil
		})
	if err != nil || len(chunk) == 0 {
		return err
	}
	return flush()
}

// diverged returns the candidates whose current winner differs from both
// watermarks.
func (r *Repository) diverged(ctx context.Context, p DueParams, candidates []models.ProjectionWatch) ([]models.ProjectionWatch, error) {
	winners, err := r.readWinners(ctx, p, candidates)
	if err != nil {
		return nil, err
	}
	var out []models.ProjectionWatch
	for _, w := range candidates {
		winner, ok := winners[w.DocumentID]
		if !ok {
			continue
		}
		// A NULL watermark never equals a real digest, so a repair_failed row
		// with no verified digest reopens only when the winner also differs
		// from the observed one: the K-bounded negative stays closed.
		if !equalDigest(w.VerifiedStateDigest, winner) && !equalDigest(w.ObservedWinnerDigest, winner) {
			out = append(out, w)
		}
	}
	return out, nil
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

// scheduled mirrors scopes.WatchScheduled for a row in memory: it sorts a
// row of the one pass into its branch.
func scheduled(w *models.ProjectionWatch, now int64) bool {
	return w.VerificationStatus != models.WatchVerified && w.NextAttemptAt != nil && *w.NextAttemptAt <= now
}

func equalDigest(watermark *string, digest string) bool {
	return watermark != nil && *watermark == digest
}
