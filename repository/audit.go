package repository

import (
	"context"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// auditWatches appends the AUDIT-branch divergences to work. Candidates are
// read a page at a time and buffered into chunks, so ReadWinners is called
// exactly ceil(candidates / ChunkSize) times; each winner read happens
// outside any transaction.
func (r *Repository) auditWatches(ctx context.Context, p DueParams, work *DueWork) error {
	chunk := make([]models.ProjectionWatch, 0, p.ChunkSize)
	flush := func() error {
		diverged, err := r.diverged(ctx, p, chunk)
		chunk = chunk[:0]
		work.Watches = append(work.Watches, diverged...)
		return err
	}
	db := r.conn(ctx)
	for _, status := range []string{models.WatchVerified, models.WatchRepairFailed} {
		err := eachPage(ctx, func() *gorm.DB { return db.Scopes(scopes.Eq("verification_status", status)) },
			watchKey, min(p.PageSize, p.ChunkSize), watchCursor, func(page []models.ProjectionWatch) error {
				for _, w := range page {
					chunk = append(chunk, w)
					if len(chunk) == p.ChunkSize {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				return nil
			})
		if err != nil {
			return err
		}
	}
	if len(chunk) == 0 {
		return nil
	}
	return flush()
}

// diverged returns the candidates whose current winner differs from both
// watermarks, leaving out those the SCHEDULE branch already returned.
func (r *Repository) diverged(ctx context.Context, p DueParams, candidates []models.ProjectionWatch) ([]models.ProjectionWatch, error) {
	winners, err := r.readWinners(ctx, p, candidates)
	if err != nil {
		return nil, err
	}
	var out []models.ProjectionWatch
	for _, w := range candidates {
		winner, ok := winners[w.DocumentID]
		if !ok || scheduled(&w, p.Now.UnixMilli()) {
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

// scheduled mirrors scopes.WatchScheduled for a row in memory: the dedupe
// of a watch both branches match.
func scheduled(w *models.ProjectionWatch, now int64) bool {
	return w.VerificationStatus != models.WatchVerified && w.NextAttemptAt != nil && *w.NextAttemptAt <= now
}

func equalDigest(watermark *string, digest string) bool {
	return watermark != nil && *watermark == digest
}
