package due

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// TestScheduledAndDiverged: the branch rules row by row.
func TestScheduledAndDiverged(t *testing.T) {
	const now = 1000
	for _, tc := range []struct {
		name      string
		w         models.ProjectionWatch
		scheduled bool
		winner    string
		diverged  bool
	}{
		{"pending due", models.ProjectionWatch{VerificationStatus: models.WatchPendingVerification, NextAttemptAt: ptr[int64](now)}, true, "x", true},
		{"pending later", models.ProjectionWatch{VerificationStatus: models.WatchPendingVerification, NextAttemptAt: ptr[int64](now + 1)}, false, "x", true},
		{"pending unscheduled", models.ProjectionWatch{VerificationStatus: models.WatchPendingVerification}, false, "x", true},
		{"verified past schedule", models.ProjectionWatch{VerificationStatus: models.WatchVerified, NextAttemptAt: ptr[int64](1)}, false, "x", true},
		{"verified at winner", models.ProjectionWatch{VerificationStatus: models.WatchVerified, VerifiedStateDigest: ptr("x")}, false, "x", false},
		{"observed winner", models.ProjectionWatch{VerificationStatus: models.WatchRepairFailed, ObservedWinnerDigest: ptr("x")}, false, "x", false},
		{"both watermarks old", models.ProjectionWatch{VerificationStatus: models.WatchRepairFailed, VerifiedStateDigest: ptr("a"),
			ObservedWinnerDigest: ptr("b")}, false, "x", true},
		{"repair_failed due", models.ProjectionWatch{VerificationStatus: models.WatchRepairFailed, NextAttemptAt: ptr[int64](now - 1)}, true, "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.scheduled, Scheduled(&tc.w, now))
			require.Equal(t, tc.diverged, Diverged(&tc.w, tc.winner))
		})
	}
}

// TestAudit: scheduled rows are emitted as read; the others are read in
// chunks (ceil(candidates / ChunkSize) Winners calls) and emitted when
// diverged; a document without a winner is left out; errors stop it.
func TestAudit(t *testing.T) {
	var page []models.ProjectionWatch
	for i := range 7 {
		w := models.ProjectionWatch{SourceID: fmt.Sprint(i), DocumentID: fmt.Sprint("d", i),
			VerificationStatus: models.WatchVerified, VerifiedStateDigest: ptr("old")}
		if i%3 == 0 {
			w.VerificationStatus, w.NextAttemptAt = models.WatchPendingVerification, ptr[int64](5)
		}
		page = append(page, w)
	}
	// Rows 0, 3, 6 are scheduled; 1, 2, 4, 5 are candidates; d2 has no
	// winner, d4's winner is the verified digest.
	winners := map[string]string{"d1": "new", "d4": "old", "d5": "new"}
	var calls [][]string
	var scheduled, diverged []string
	a := &Audit{Now: 10, ChunkSize: 3,
		Winners: func(_ context.Context, cs []models.ProjectionWatch) (map[string]string, error) {
			var ids []string
			for _, c := range cs {
				ids = append(ids, c.DocumentID)
			}
			calls = append(calls, ids)
			return winners, nil
		},
		Scheduled: func(w *models.ProjectionWatch) error { scheduled = append(scheduled, w.SourceID); return nil },
		Diverged:  func(w *models.ProjectionWatch) error { diverged = append(diverged, w.SourceID); return nil },
	}
	require.NoError(t, a.Page(context.Background(), page[:4]))
	require.NoError(t, a.Page(context.Background(), page[4:]))
	require.NoError(t, a.Flush(context.Background()))
	require.NoError(t, a.Flush(context.Background()), "an empty flush reads nothing")
	require.Equal(t, []string{"0", "3", "6"}, scheduled)
	require.Equal(t, [][]string{{"d1", "d2", "d4"}, {"d5"}}, calls)
	require.Equal(t, []string{"1", "5"}, diverged)

	boom := errors.New("boom")
	a = &Audit{Now: 10, ChunkSize: 1,
		Winners:   func(context.Context, []models.ProjectionWatch) (map[string]string, error) { return nil, boom },
		Scheduled: func(*models.ProjectionWatch) error { return nil },
		Diverged:  func(*models.ProjectionWatch) error { return nil }}
	require.ErrorIs(t, a.Page(context.Background(), page[1:2]), boom)
	a = &Audit{Now: 10, ChunkSize: 10, Winners: a.Winners,
		Scheduled: func(*models.ProjectionWatch) error { return boom }}
	require.ErrorIs(t, a.Page(context.Background(), page), boom)
}
