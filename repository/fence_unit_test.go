package repository

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/fence"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// These run without a database: what a refused write becomes (the error,
// the event) is a pure function of the fence's verdict and the stored row.

func fenceN(i int) Fence {
	return Fence{CallerDID: "c", OperationID: "op" + string(rune('0'+i)), LeaseToken: "tok"}
}

func mustCommit(t *testing.T, p CommitParams) fence.Write {
	t.Helper()
	w, err := commitWrite(p)
	require.NoError(t, err)
	return w
}

// TestExplainRefusal: why a fenced write changed nothing, from the stored
// row alone: a replay of this very write, a lost lease with its reason, or
// the write's own guard.
func TestExplainRefusal(t *testing.T) {
	r := &Repository{obs: nopObserver{}, log: slog.New(slog.DiscardHandler)}
	doc, other := "doc-1", "doc-2"
	commit := mustCommit(t, CommitParams{Fence: fenceN(1), DocumentID: &doc})
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name   string
		stored models.Operation
		replay bool
		reason string
		guard  bool
	}{
		{"replay of this commit", models.Operation{State: models.OperationCommitted, EndedLeaseToken: s("tok"), DocumentID: &doc}, true, "", false},
		{"finished by another write", models.Operation{State: models.OperationCommitted, EndedLeaseToken: s("other")}, false, LeaseLostFinished, false},
		{"ended here, then released", models.Operation{State: models.OperationAttempted, EndedLeaseToken: s("tok")}, false, LeaseLostEnded, false},
		{"never held", models.Operation{State: models.OperationAttempted}, false, LeaseLostNotHeld, false},
		{"held by another", models.Operation{State: models.OperationAttempted, LeaseToken: s("other")}, false, LeaseLostHeldByOther, false},
		{"linked to another document", models.Operation{State: models.OperationAttempted, LeaseToken: s("tok"), DocumentID: &other}, false, "", true},
		{"expired", models.Operation{State: models.OperationAttempted, LeaseToken: s("tok")}, false, LeaseLostExpired, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := r.explain(context.Background(), commit, &tc.stored)
			switch {
			case tc.replay:
				require.NoError(t, err)
				require.True(t, w.Replay)
			case tc.guard:
				require.ErrorIs(t, err, ErrInvalidInput)
				require.True(t, strings.Contains(err.Error(), "doc-2"))
			default:
				var lost *LeaseLostError
				require.True(t, errors.As(err, &lost), "%v", err)
				require.Equal(t, tc.reason, lost.Reason)
				require.ErrorIs(t, err, ErrLeaseLost)
			}
		})
	}
}

// eventLog records the events a repository reports.
type eventLog struct{ events []Event }

func (l *eventLog) Begin(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}
func (l *eventLog) Observe(_ context.Context, e Event) { l.events = append(l.events, e) }

// TestFailureReportLostToAnotherIsCounted: a failure report refused because
// another report of the same attempt was counted first is a lost lease in
// its own words (LeaseLostAttemptsChanged), and reported as every lost
// lease is: one EventLeaseLost with its reason.
func TestFailureReportLostToAnotherIsCounted(t *testing.T) {
	obs := &eventLog{}
	r := &Repository{obs: obs, log: slog.New(slog.DiscardHandler), backoff: DefaultBackoff(), now: time.Now}
	s := func(v string) *string { return &v }
	w := r.failureWrite(FailureParams{Fence: fenceN(1), Kind: "timeout"}, &models.Operation{Attempts: 1})
	_, err := r.explain(context.Background(), w, &models.Operation{State: models.OperationAttempted, LeaseToken: s("tok"), Attempts: 2})
	var lost *LeaseLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, LeaseLostAttemptsChanged, lost.Reason)
	require.Equal(t, []Event{{Kind: EventLeaseLost, Count: 1, Reason: LeaseLostAttemptsChanged}}, obs.events)

	// A document-id mismatch is the caller's error, not a lost lease.
	obs.events = nil
	doc, other := "doc-1", "doc-2"
	_, err = r.explain(context.Background(), mustCommit(t, CommitParams{Fence: fenceN(1), DocumentID: &doc}),
		&models.Operation{State: models.OperationAttempted, LeaseToken: s("tok"), DocumentID: &other})
	require.ErrorIs(t, err, ErrInvalidInput)
	require.Empty(t, obs.events)
}
