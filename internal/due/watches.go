package due

import (
	"context"

	"github.com/connstore/connstore/models"
)

// Scheduled reports whether a watch is in the SCHEDULE branch at now (epoch
// milliseconds): not verified, with a next attempt at or before now. It
// mirrors scopes.WatchScheduled for a row in memory (the repository tests
// the two against each other on every kind of row).
func Scheduled(w *models.ProjectionWatch, now int64) bool {
	return w.VerificationStatus != models.WatchVerified && w.NextAttemptAt != nil && *w.NextAttemptAt <= now
}

// Diverged reports whether a document's current winner differs from both of
// the watch's watermarks. A NULL watermark never equals a real digest, so a
// repair_failed row with no verified digest reopens only when the winner
// also differs from the observed one: the K-bounded negative stays closed.
func Diverged(w *models.ProjectionWatch, winner string) bool {
	return !equal(w.VerifiedStateDigest, winner) && !equal(w.ObservedWinnerDigest, winner)
}

func equal(watermark *string, digest string) bool {
	return watermark != nil && *watermark == digest
}

// Audit sorts the watch rows of one sweep, in the order they are read, into
// its branches: a scheduled row is emitted as it comes; the others are
// audit candidates, collected ChunkSize at a time, whose winners are read
// with one Winners call per chunk, and emitted when they diverged. Each row
// is classified once, as it was read.
type Audit struct {
	// Now is the sweep's time, epoch milliseconds.
	Now int64
	// ChunkSize is the number of candidates per Winners call; positive.
	ChunkSize int
	// Winners returns the current winner digest of each candidate's
	// document, by document id; a document left out has no readable winner
	// and its watch is not emitted.
	Winners func(ctx context.Context, candidates []models.ProjectionWatch) (map[string]string, error)
	// Scheduled and Diverged receive the rows of each branch.
	Scheduled, Diverged func(*models.ProjectionWatch) error

	chunk []models.ProjectionWatch
}

// Page classifies one page of rows.
func (a *Audit) Page(ctx context.Context, page []models.ProjectionWatch) error {
	for i := range page {
		if Scheduled(&page[i], a.Now) {
			if err := a.Scheduled(&page[i]); err != nil {
				return err
			}
			continue
		}
		if a.chunk = append(a.chunk, page[i]); len(a.chunk) == a.ChunkSize {
			if err := a.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush reads the winners of the candidates collected so far and emits the
// diverged ones; with none collected it reads nothing.
func (a *Audit) Flush(ctx context.Context) error {
	if len(a.chunk) == 0 {
		return nil
	}
	winners, err := a.Winners(ctx, a.chunk)
	for i := range a.chunk {
		if err != nil {
			break
		}
		if winner, ok := winners[a.chunk[i].DocumentID]; ok && Diverged(&a.chunk[i], winner) {
			w := a.chunk[i]
			err = a.Diverged(&w)
		}
	}
	a.chunk = a.chunk[:0]
	return err
}
