package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm/clause"
)

var (
	resolvedStates   = []string{models.CandidateApplied, models.CandidateRefused}
	applicableStates = []string{models.CandidatePresent, models.CandidateAbsent, models.CandidateCancelled}
	outcomeStates    = map[string]bool{models.CandidatePending: true, models.CandidatePresent: true,
		models.CandidateAbsent: true, models.CandidateCancelled: true}
	candidateKeyColumns = []string{"partition", "provenance", "document_id"}
	candidateDueColumns = append([]string{"next_attempt_at"}, candidateKeyColumns...)
)

// CandidateCursor is the position after which ListSweepCandidates resumes.
// NextAttemptAt is used only by a due listing.
type CandidateCursor struct {
	NextAttemptAt                     int64
	Partition, Provenance, DocumentID string
}

// CandidateCursorOf returns the cursor just after c.
func CandidateCursorOf(c *models.SweepCandidate) *CandidateCursor {
	return &CandidateCursor{c.NextAttemptAt, c.Partition, c.Provenance, c.DocumentID}
}

// ListCandidatesParams pages through a connector and owner's candidates.
type ListCandidatesParams struct {
	OwnerDID, ConnectorName string
	// DueAt, if set, keeps only unresolved candidates with next_attempt_at
	// at or before it.
	DueAt *time.Time
	// After resumes after this position; nil starts at the beginning.
	After *CandidateCursor
	// Limit is the page size; it must be positive.
	Limit int
}

// ListSweepCandidates returns up to Limit candidates of a connector and
// owner, paged on keys a caller's own writes do not move.
//
// Without DueAt the order is the candidate's identity (partition,
// provenance, document_id), which never changes: paging to the end visits
// every candidate that existed throughout exactly once, whatever is written
// meanwhile. With DueAt the order is (next_attempt_at, identity), so the most
// overdue come first and each page is an index range. Recording an outcome
// or failure moves a candidate's next_attempt_at: one rescheduled after DueAt
// leaves the listing, one rescheduled to a time still at or before DueAt but
// after the cursor is listed again (it is due again), and one another writer
// moves before the cursor is picked up by the next pass.
func (r *Repository) ListSweepCandidates(ctx context.Context, p ListCandidatesParams) (_ []models.SweepCandidate, err error) {
	ctx, end := r.start(ctx, "ListSweepCandidates")
	defer end(&err)
	err = requireKeys("owner", p.OwnerDID, "connector", p.ConnectorName)
	if err == nil {
		err = errors.Join(requireLimit(p.Limit), requireText("list", p))
	}
	if err == nil && p.DueAt != nil {
		err = requireTime("due at", *p.DueAt)
	}
	if err != nil {
		return nil, fmt.Errorf("list sweep candidates: %w", err)
	}
	q := r.conn(ctx).Scopes(scopes.Owner(p.OwnerDID), scopes.Connector(p.ConnectorName))
	if p.DueAt != nil {
		q = q.Scopes(scopes.NotIn("state", resolvedStates...)).
			Where(clause.Lte{Column: clause.Column{Name: "next_attempt_at"}, Value: p.DueAt.UnixMilli()})
	}
	columns, after := candidateKeyColumns, []any(nil)
	if p.After != nil {
		after = []any{p.After.Partition, p.After.Provenance, p.After.DocumentID}
	}
	if p.DueAt != nil {
		columns = candidateDueColumns
		if p.After != nil {
			after = append([]any{p.After.NextAttemptAt}, after...)
		}
	}
	var rows []models.SweepCandidate
	if err := q.Scopes(scopes.After(columns, after)).Limit(p.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sweep candidates: %w", err)
	}
	return rows, nil
}

// SweepOutcome is the verification result of one candidate.
type SweepOutcome struct {
	CandidateKey
	// Outcome is pending, present, absent or cancelled.
	Outcome string
	// LastError is the error met, if any.
	LastError *string
	// NextAttemptAt schedules the next look; the zero time means 0 (due).
	NextAttemptAt time.Time
}

// RecordSweepOutcome stores an outcome on an unresolved candidate and counts
// the attempt; it reports whether a candidate changed (a resolved one never
// does).
func (r *Repository) RecordSweepOutcome(ctx context.Context, o SweepOutcome) (_ bool, err error) {
	ctx, end := r.start(ctx, "RecordSweepOutcome")
	defer end(&err)
	if err := errors.Join(o.validate(), requireText("outcome", o)); err != nil {
		return false, fmt.Errorf("record sweep outcome: %w", err)
	}
	if !outcomeStates[o.Outcome] {
		return false, fmt.Errorf("record sweep outcome: %w", invalid("unknown outcome %q", o.Outcome))
	}
	next, err := optionalMillis("next attempt at", o.NextAttemptAt)
	if err != nil {
		return false, fmt.Errorf("record sweep outcome: %w", err)
	}
	return r.updateCandidate(ctx, "record sweep outcome", o.CandidateKey, scopes.NotIn("state", resolvedStates...),
		map[string]any{"state": o.Outcome, "attempts": store.Increment("", "attempts"), "last_error": o.LastError,
			"next_attempt_at": next})
}

// ApplyFailure is a failed attempt to apply a candidate's outcome.
type ApplyFailure struct {
	CandidateKey
	// LastError is the error met; required.
	LastError string
	// NextAttemptAt schedules the retry.
	NextAttemptAt time.Time
}

// RecordSweepApplyFailure counts an apply failure on an unresolved
// candidate; at the MaxSweepApplyAttempts-th failure the candidate is
// refused instead of pending. It reports whether the candidate is now refused.
func (r *Repository) RecordSweepApplyFailure(ctx context.Context, f ApplyFailure) (refused bool, err error) {
	ctx, end := r.start(ctx, "RecordSweepApplyFailure")
	defer end(&err)
	if err := errors.Join(f.validate(), requireText("apply failure", f)); err != nil {
		return false, fmt.Errorf("record sweep apply failure: %w", err)
	}
	if f.LastError == "" {
		return false, fmt.Errorf("record sweep apply failure: %w", invalid("last error is empty"))
	}
	next, err := optionalMillis("next attempt at", f.NextAttemptAt)
	if err != nil {
		return false, fmt.Errorf("record sweep apply failure: %w", err)
	}
	var rows []models.SweepCandidate
	err = r.conn(ctx).Model(&rows).Clauses(clause.Returning{Columns: []clause.Column{{Name: "state"}}}).
		Scopes(f.CandidateKey.scope, scopes.NotIn("state", resolvedStates...)).
		Updates(map[string]any{
			"state":          store.RefusedAfter(MaxSweepApplyAttempts-1, models.CandidateRefused, models.CandidatePending),
			"apply_failures": store.Increment("", "apply_failures"), "last_error": f.LastError,
			"next_attempt_at": next, "updated_at": r.nowMillis(),
		}).Error
	if err != nil {
		return false, fmt.Errorf("record sweep apply failure %s: %w", f.CandidateKey, err)
	}
	return len(rows) == 1 && rows[0].State == models.CandidateRefused, nil
}

// MarkSweepCandidateApplied marks a candidate applied, only from present,
// absent or cancelled; it reports whether it did.
func (r *Repository) MarkSweepCandidateApplied(ctx context.Context, k CandidateKey) (_ bool, err error) {
	ctx, end := r.start(ctx, "MarkSweepCandidateApplied")
	defer end(&err)
	if err := k.validate(); err != nil {
		return false, fmt.Errorf("mark sweep candidate applied: %w", err)
	}
	return r.updateCandidate(ctx, "mark sweep candidate applied", k, scopes.State(applicableStates...),
		map[string]any{"state": models.CandidateApplied, "last_error": nil, "next_attempt_at": 0})
}

func (r *Repository) updateCandidate(ctx context.Context, action string, k CandidateKey, guard scopes.Scope, set map[string]any) (bool, error) {
	set["updated_at"] = r.nowMillis()
	tx := r.conn(ctx).Model(&models.SweepCandidate{}).Scopes(k.scope, guard).Updates(set)
	if tx.Error != nil {
		return false, fmt.Errorf("%s %s: %w", action, k, tx.Error)
	}
	return tx.RowsAffected > 0, nil
}

// optionalMillis converts t to epoch ms; the zero time is 0 (due at once).
func optionalMillis(name string, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	if err := requireTime(name, t); err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}
