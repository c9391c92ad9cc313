package repository

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// These run without a database: the batch planner and the fence's
// explanation of a refused write are pure functions of their inputs.

func fenceN(i int) Fence {
	return Fence{CallerDID: "c", OperationID: "op" + string(rune('0'+i)), LeaseToken: "tok"}
}

// TestPlanBatch: a column every write sets to one value is set plainly; a
// column whose values differ is read from the batch's rows; one only some
// writes set carries a per-row flag; a guard is a per-row column, NULL where
// a write has none. The statement text depends on the batch's shape, never
// on its size.
func TestPlanBatch(t *testing.T) {
	doc := "doc-1"
	etagA, etagB := "a", "b"
	ws := []fencedWrite{
		mustCommit(t, CommitParams{Fence: fenceN(1), ProviderEtag: &etagA, DocumentID: &doc}),
		mustCommit(t, CommitParams{Fence: fenceN(2), ProviderEtag: &etagB}),
	}
	for i := range ws {
		ws[i].set["updated_at"] = int64(7)
	}
	p, err := planBatch("postgres", ws)
	require.NoError(t, err)
	require.Equal(t, models.OperationCommitted, p.set["state"], "one value for every write: set plainly")
	require.Equal(t, int64(7), p.set["updated_at"])
	require.Equal(t, gorm.Expr("v.v_provider_etag"), p.set["provider_etag"], "values differ: read per row")
	require.Equal(t, gorm.Expr("CASE WHEN v.s_document_id THEN v.v_document_id ELSE ? END", clause.Column{Name: "document_id"}),
		p.set["document_id"], "set by some writes only: behind a per-row flag")
	var where []string
	for _, w := range p.where {
		where = append(where, w.(clause.Expr).SQL)
	}
	require.Contains(t, where, "(v.g_document_id IS NULL OR document_id IS NULL OR document_id = v.g_document_id)")

	from := p.from.(fromRows)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(from.vars[0].(string)), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "a", rows[0]["v_provider_etag"])
	require.Equal(t, true, rows[0]["s_document_id"])
	require.Equal(t, false, rows[1]["s_document_id"])
	require.Equal(t, "doc-1", rows[0]["g_document_id"])
	require.Nil(t, rows[1]["g_document_id"])

	// The same shape, ten times the rows: the same statement text.
	var many []fencedWrite
	for range 10 {
		many = append(many, ws...)
	}
	p10, err := planBatch("postgres", many)
	require.NoError(t, err)
	require.Equal(t, from.sql, p10.from.(fromRows).sql)
}

func mustCommit(t *testing.T, p CommitParams) fencedWrite {
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
