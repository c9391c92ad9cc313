package fence

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// TestExplain: every write's refusal, from the stored row alone. A row this
// token ended showing the write's own result is its replay; anything else
// is the first of finished, ended here, not leased, held by another, the
// write's own guard, expired.
func TestExplain(t *testing.T) {
	tg := target(1)
	doc, other := "doc-1", "doc-2"
	etag := "e1"
	status := int64(503)
	commit := Commit(tg, &doc, &etag, models.JSON(`{"id":1}`))
	failure := Failure(tg, 2, Answer{Kind: "http", HTTPStatus: &status}, ptr(int64(5000)))
	endedBy := func(tok string, op models.Operation) *models.Operation {
		op.EndedLeaseToken = &tok
		return &op
	}
	held := func(tok string, op models.Operation) *models.Operation {
		op.State = models.OperationAttempted
		op.LeaseToken = &tok
		return &op
	}
	attempted := models.Operation{State: models.OperationAttempted}
	for _, tc := range []struct {
		name   string
		w      Write
		stored *models.Operation
		want   Verdict
	}{
		// commit
		{"commit replayed", commit, endedBy("tok", models.Operation{State: models.OperationCommitted, DocumentID: &doc, ProviderEtag: &etag, ResultEntity: models.JSON(`{"id":1}`)}), Verdict{Replay: true}},
		{"commit: another result ended here", commit, endedBy("tok", models.Operation{State: models.OperationCommitted, DocumentID: &doc, ProviderEtag: ptr("e2")}), Verdict{Reason: Finished}},
		{"commit: finished by another token", commit, endedBy("other", models.Operation{State: models.OperationCommitted, DocumentID: &doc, ProviderEtag: &etag, ResultEntity: models.JSON(`{"id":1}`)}), Verdict{Reason: Finished}},
		{"commit: ended here, then released", commit, endedBy("tok", attempted), Verdict{Reason: Ended}},
		{"commit: never leased", commit, &attempted, Verdict{Reason: NotHeld}},
		{"commit: held by another", commit, held("other", models.Operation{}), Verdict{Reason: HeldByOther}},
		{"commit: linked to another document", commit, held("tok", models.Operation{DocumentID: &other}),
			Verdict{Conflict: "operation is linked to document doc-2; the commit names doc-1"}},
		{"commit: held, same document, refused: expired", commit, held("tok", models.Operation{DocumentID: &doc}), Verdict{Reason: Expired}},
		// failure
		{"failure replayed", failure, endedBy("tok", models.Operation{State: models.OperationAttempted, Attempts: 3, LastKind: ptr("http"), LastHTTPStatus: &status}), Verdict{Replay: true}},
		{"failure replayed as dead", failure, endedBy("tok", models.Operation{State: models.OperationDead, Attempts: 3, LastKind: ptr("http"), LastHTTPStatus: &status}), Verdict{Replay: true}},
		{"failure: another kind ended here", failure, endedBy("tok", models.Operation{State: models.OperationAttempted, LastKind: ptr("timeout")}), Verdict{Reason: Ended}},
		{"failure: attempts changed", failure, held("tok", models.Operation{Attempts: 3}), Verdict{Reason: AttemptsChanged}},
		{"failure: same attempts, expired", failure, held("tok", models.Operation{Attempts: 2}), Verdict{Reason: Expired}},
		// dead and reconcile-only
		{"dead replayed", Finish(tg, models.OperationDead, Answer{}), endedBy("tok", models.Operation{State: models.OperationDead}), Verdict{Replay: true}},
		{"dead: ended here as reconcile-only", Finish(tg, models.OperationDead, Answer{}), endedBy("tok", models.Operation{State: models.OperationReconcileOnly}), Verdict{Reason: Finished}},
		{"reconcile-only replayed", Finish(tg, models.OperationReconcileOnly, Answer{}), endedBy("tok", models.Operation{State: models.OperationReconcileOnly}), Verdict{Replay: true}},
		// release and snooze
		{"release replayed", Release(tg, 10), endedBy("tok", attempted), Verdict{Replay: true}},
		{"release: held by another", Release(tg, 10), held("other", models.Operation{}), Verdict{Reason: HeldByOther}},
		{"snooze replayed", Snooze(tg, 99, nil), endedBy("tok", models.Operation{State: models.OperationAttempted, NextAttemptAt: ptr(int64(99))}), Verdict{Replay: true}},
		{"snooze: ended here for another time", Snooze(tg, 99, nil), endedBy("tok", models.Operation{State: models.OperationAttempted, NextAttemptAt: ptr(int64(98))}), Verdict{Reason: Ended}},
		// heartbeat: no replay, it does not end the lease
		{"heartbeat: ended here", Heartbeat(tg, int64(1), 2), endedBy("tok", attempted), Verdict{Reason: Ended}},
		{"heartbeat: held by this token, refused: expired", Heartbeat(tg, int64(1), 2), held("tok", models.Operation{}), Verdict{Reason: Expired}},
		{"heartbeat: finished", Heartbeat(tg, int64(1), 2), &models.Operation{State: models.OperationCommitted}, Verdict{Reason: Finished}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Explain(tc.w, tc.stored))
		})
	}
}

// TestStamp: every write gets updated_at; a lease-ending write also clears
// the lease and records the token it ended (what its replay is recognised
// by); a heartbeat keeps its lease.
func TestStamp(t *testing.T) {
	tg := target(1)
	for _, w := range []Write{Commit(tg, nil, nil, nil), Failure(tg, 0, Answer{Kind: "k", HTTPStatus: nil}, nil), Finish(tg, models.OperationDead, Answer{}),
		Finish(tg, models.OperationReconcileOnly, Answer{}), Release(tg, 1), Snooze(tg, 1, nil)} {
		w.Stamp(42)
		require.Equal(t, int64(42), w.Set["updated_at"], w.Action)
		require.True(t, w.Ends, w.Action)
		require.Equal(t, "tok", w.Set["ended_lease_token"], w.Action)
		require.Contains(t, w.Set, "lease_token", w.Action)
		require.Nil(t, w.Set["lease_token"], w.Action)
		require.Nil(t, w.Set["lease_expires_at"], w.Action)
	}
	hb := Heartbeat(tg, int64(7), 8)
	hb.Stamp(42)
	require.Equal(t, map[string]any{"lease_expires_at": int64(7), "next_attempt_at": int64(8), "updated_at": int64(42)}, hb.Set)
}

// TestFailureSchedulesOrKills: a failure with a next time stays attempted
// and is due then; without one (the backoff gave up) it is dead; either way
// the attempt is counted once, guarded on the count read.
func TestFailureSchedulesOrKills(t *testing.T) {
	tg := target(1)
	retry := Failure(tg, 4, Answer{Kind: "timeout", HTTPStatus: nil}, ptr(int64(1234)))
	require.Equal(t, models.OperationAttempted, retry.Set["state"])
	require.Equal(t, int64(1234), retry.Set["next_attempt_at"])
	require.Equal(t, int64(5), retry.Set["attempts"])
	require.Equal(t, []Guard{{Col: "attempts", Value: int64(4)}}, retry.Guards)
	dead := Failure(tg, 4, Answer{Kind: "timeout", HTTPStatus: nil}, nil)
	require.Equal(t, models.OperationDead, dead.Set["state"])
	require.Nil(t, dead.Set["next_attempt_at"])
}
