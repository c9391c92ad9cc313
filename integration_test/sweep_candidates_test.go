package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func TestListSweepCandidatesDueAndPaging(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a", "b", "c", "d", "e", "f")
		now := e.clock.Now()
		// state, next_attempt_at (offset from now, ms)
		setup := map[string]struct {
			state string
			next  time.Duration
		}{
			"a": {models.CandidatePending, -time.Second}, "b": {models.CandidatePresent, 0},
			"c": {models.CandidateAbsent, time.Second}, "d": {models.CandidateApplied, -time.Second},
			"e": {models.CandidateRefused, -time.Second}, "f": {models.CandidateCancelled, -2 * time.Second},
		}
		for doc, s := range setup {
			require.NoError(t, e.db.Model(&models.SweepCandidate{}).Where("document_id = ?", doc).
				Updates(map[string]any{"state": s.state, "next_attempt_at": now.Add(s.next).UnixMilli()}).Error)
		}
		list := func(dueAt *time.Time) []string {
			var docs []string
			var after *repository.CandidateCursor
			for {
				page, err := e.repo.ListSweepCandidates(ctx(t), repository.ListCandidatesParams{
					OwnerDID: "owner", ConnectorName: "crm", DueAt: dueAt, After: after, Limit: 2})
				require.NoError(t, err)
				for i := range page {
					docs = append(docs, page[i].DocumentID)
				}
				if len(page) < 2 {
					return docs
				}
				after = repository.CandidateCursorOf(&page[len(page)-1])
			}
		}
		require.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, list(nil), "all, by identity")
		for _, tc := range []struct {
			at   time.Duration
			want []string
		}{
			{-3 * time.Second, nil},
			// Most overdue first: f is due 2s ago, a 1s ago.
			{-time.Second, []string{"f", "a"}},
			{0, []string{"f", "a", "b"}},
			{time.Second, []string{"f", "a", "b", "c"}},
		} {
			at := now.Add(tc.at)
			require.Equal(t, tc.want, list(&at), "due at %v", tc.at)
		}
	})
}

func TestRecordSweepOutcome(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a", "b", "c")
		e.clock.Advance(time.Second)
		next := e.clock.At(time.Minute)
		ok, err := e.repo.RecordSweepOutcome(ctx(t), repository.SweepOutcome{CandidateKey: candKey("p1", "a"),
			Outcome: models.CandidateAbsent, LastError: models.StrPtr("gone"), NextAttemptAt: next})
		require.NoError(t, err)
		require.True(t, ok)
		c := candidate(t, e, "p1", "a")
		require.Equal(t, models.CandidateAbsent, c.State)
		require.Equal(t, int64(1), c.Attempts)
		require.Equal(t, "gone", *c.LastError)
		require.Equal(t, next.UnixMilli(), c.NextAttemptAt)
		require.Equal(t, e.clock.Millis(), c.UpdatedAt)

		for _, resolved := range []string{models.CandidateApplied, models.CandidateRefused} {
			setState(t, e, "p1", "b", resolved)
			before := candidate(t, e, "p1", "b")
			ok, err := e.repo.RecordSweepOutcome(ctx(t), repository.SweepOutcome{CandidateKey: candKey("p1", "b"),
				Outcome: models.CandidatePresent})
			require.NoError(t, err)
			require.False(t, ok, "a %s candidate is final", resolved)
			require.Equal(t, before, candidate(t, e, "p1", "b"))
		}
	})
}

func TestApplyFailureRefusedAtFifth(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a")
		setState(t, e, "p1", "a", models.CandidatePresent)
		for i := 1; i <= repository.MaxSweepApplyAttempts; i++ {
			next := e.clock.At(time.Duration(i) * time.Minute)
			refused, err := e.repo.RecordSweepApplyFailure(ctx(t), repository.ApplyFailure{
				CandidateKey: candKey("p1", "a"), LastError: "apply failed", NextAttemptAt: next})
			require.NoError(t, err)
			c := candidate(t, e, "p1", "a")
			require.Equal(t, int64(i), c.ApplyFailures)
			require.Equal(t, i == repository.MaxSweepApplyAttempts, refused, "failure %d", i)
			if i < repository.MaxSweepApplyAttempts {
				require.Equal(t, models.CandidatePending, c.State)
				require.Equal(t, next.UnixMilli(), c.NextAttemptAt)
			} else {
				require.Equal(t, models.CandidateRefused, c.State)
			}
		}
		before := candidate(t, e, "p1", "a")
		refused, err := e.repo.RecordSweepApplyFailure(ctx(t), repository.ApplyFailure{
			CandidateKey: candKey("p1", "a"), LastError: "again"})
		require.NoError(t, err)
		require.False(t, refused, "a refused candidate is not counted again")
		require.Equal(t, before, candidate(t, e, "p1", "a"))
	})
}

func TestMarkAppliedOnlyFromVerifiedStates(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		states := map[string]bool{
			models.CandidatePending: false, models.CandidatePresent: true, models.CandidateAbsent: true,
			models.CandidateCancelled: true, models.CandidateApplied: false, models.CandidateRefused: false,
		}
		for state := range states {
			recordReceipt(t, e, "p1", state)
			setState(t, e, "p1", state, state)
			require.NoError(t, e.db.Model(&models.SweepCandidate{}).Where("document_id = ?", state).
				Updates(map[string]any{"last_error": "x", "next_attempt_at": 99}).Error)
		}
		e.clock.Advance(time.Second)
		for state, allowed := range states {
			before := candidate(t, e, "p1", state)
			ok, err := e.repo.MarkSweepCandidateApplied(ctx(t), candKey("p1", state))
			require.NoError(t, err)
			require.Equal(t, allowed, ok, state)
			after := candidate(t, e, "p1", state)
			if !allowed {
				require.Equal(t, before, after, state)
				continue
			}
			require.Equal(t, models.CandidateApplied, after.State)
			require.Nil(t, after.LastError)
			require.Equal(t, int64(0), after.NextAttemptAt)
			require.Equal(t, e.clock.Millis(), after.UpdatedAt)
		}
	})
}

// TestListSweepCandidatesStableUnderWrites: a candidate written while a
// caller pages through the listing is listed once, not again at the end.
func TestListSweepCandidatesStableUnderWrites(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a", "b", "c", "d", "e")
		var docs []string
		var after *repository.CandidateCursor
		for {
			page, err := e.repo.ListSweepCandidates(ctx(t), repository.ListCandidatesParams{
				OwnerDID: "owner", ConnectorName: "crm", After: after, Limit: 2})
			require.NoError(t, err)
			for i := range page {
				docs = append(docs, page[i].DocumentID)
				e.clock.Advance(time.Millisecond)
				_, err := e.repo.RecordSweepOutcome(ctx(t), repository.SweepOutcome{
					CandidateKey: candKey("p1", page[i].DocumentID), Outcome: models.CandidatePresent})
				require.NoError(t, err)
			}
			if len(page) < 2 {
				break
			}
			after = repository.CandidateCursorOf(&page[len(page)-1])
		}
		require.Equal(t, []string{"a", "b", "c", "d", "e"}, docs)
	})
}
