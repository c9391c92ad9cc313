package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestFencedWriteReplay: each lease-ending write retried by the same fence
// with the same result (a lost reply) returns the stored row flagged as a
// replay and writes nothing; the same fence with another result is refused.
func TestFencedWriteReplay(t *testing.T) {
	t.Parallel()
	status := int64(503)
	other := int64(500)
	cases := []struct {
		name          string
		write, differ func(e *env, f repository.Fence) (*repository.FencedWrite, error)
		state         string
	}{
		{"commit", func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.CommitOperation(t.Context(), repository.CommitParams{Fence: f, DocumentID: models.StrPtr("d"),
				ProviderEtag: models.StrPtr("e1"), ResultEntity: models.JSON(`{"id": 1}`)})
		}, func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.CommitOperation(t.Context(), repository.CommitParams{Fence: f, DocumentID: models.StrPtr("d"),
				ProviderEtag: models.StrPtr("e2"), ResultEntity: models.JSON(`{"id":1}`)})
		}, models.OperationCommitted},
		{"dead", func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.MarkOperationDead(t.Context(), f)
		}, func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.MarkOperationReconcileOnly(t.Context(), f)
		}, models.OperationDead},
		{"reconcile-only", func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.MarkOperationReconcileOnly(t.Context(), f)
		}, func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.MarkOperationDead(t.Context(), f)
		}, models.OperationReconcileOnly},
		{"failure", func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.RecordOperationFailure(t.Context(), repository.FailureParams{Fence: f, Kind: "http", HTTPStatus: &status})
		}, func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.RecordOperationFailure(t.Context(), repository.FailureParams{Fence: f, Kind: "http", HTTPStatus: &other})
		}, models.OperationAttempted},
		{"release", func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.ReleaseOperation(t.Context(), f)
		}, func(e *env, f repository.Fence) (*repository.FencedWrite, error) {
			return e.repo.MarkOperationDead(t.Context(), f)
		}, models.OperationAttempted},
	}
	forEachDB(t, func(t *testing.T, e *env) {
		for _, tc := range cases {
			in := opInput("caller", tc.name)
			in.OwnerDID = tc.name // each case claims only its own operation
			_, _, err := e.repo.RecordOperation(ctx(t), in)
			require.NoError(t, err)
			ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute, OwnerDID: tc.name})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			f := repository.FenceOf(&ops[0])
			first, err := tc.write(e, f)
			require.NoError(t, err, tc.name)
			require.False(t, first.Replay, tc.name)
			require.Equal(t, tc.state, first.State, tc.name)
			stored := snapshot(t, e, "caller", tc.name)

			e.clock.Advance(time.Second) // a replay must not touch updated_at either
			again, err := tc.write(e, f)
			require.NoError(t, err, tc.name)
			require.True(t, again.Replay, tc.name)
			require.Equal(t, stored, *again.Operation, tc.name)
			require.Equal(t, stored, snapshot(t, e, "caller", tc.name), tc.name)

			_, err = tc.differ(e, f)
			var lost *repository.LeaseLostError
			require.ErrorAs(t, err, &lost, tc.name)
			require.ErrorIs(t, err, repository.ErrLeaseLost, tc.name)
			require.Equal(t, stored, snapshot(t, e, "caller", tc.name), tc.name)
			if tc.state == models.OperationAttempted {
				require.Equal(t, repository.LeaseLostEnded, lost.Reason, tc.name)
			} else {
				require.Equal(t, repository.LeaseLostFinished, lost.Reason, tc.name)
			}
		}
	})
}

// TestLeaseLostReasons: each refusal of a fenced write names its reason.
func TestLeaseLostReasons(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		reason := func(err error) string {
			var lost *repository.LeaseLostError
			require.ErrorAs(t, err, &lost)
			require.ErrorIs(t, err, repository.ErrLeaseLost)
			return lost.Reason
		}
		recordOp(t, e, "caller", "op")
		first := claimOne(t, e)
		_, err := e.repo.HeartbeatOperation(ctx(t), repository.Fence{CallerDID: "caller", OperationID: "op", LeaseToken: "forged"}, time.Minute)
		require.Equal(t, repository.LeaseLostHeldByOther, reason(err))

		e.clock.Advance(2 * time.Minute)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: first})
		require.Equal(t, repository.LeaseLostExpired, reason(err))

		second := claimOne(t, e)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: first})
		require.Equal(t, repository.LeaseLostHeldByOther, reason(err))
		_, err = e.repo.ReleaseOperation(ctx(t), second)
		require.NoError(t, err)
		_, err = e.repo.HeartbeatOperation(ctx(t), first, time.Minute)
		require.Equal(t, repository.LeaseLostNotHeld, reason(err))

		third := claimOne(t, e)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: third})
		require.NoError(t, err)
		_, err = e.repo.MarkOperationDead(ctx(t), second)
		require.Equal(t, repository.LeaseLostFinished, reason(err))
		require.ErrorContains(t, err, "already finished as committed")
	})
}
