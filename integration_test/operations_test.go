package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func TestRecordOperationIdempotent(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		first := recordOp(t, e, "caller", "op1")
		require.Equal(t, models.OperationAttempted, first.State)
		require.Equal(t, int64(0), first.Version)
		require.NotNil(t, first.Incarnation)
		require.Equal(t, e.clock.Millis(), *first.NextAttemptAt, "due at once")
		require.Equal(t, e.clock.Millis(), first.CreatedAt)

		e.clock.Advance(time.Second)
		again, created, err := e.repo.RecordOperation(ctx(t), opInput("caller", "op1"))
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.CreatedAt, again.CreatedAt, "the stored row, not a new one")

		changed := opInput("caller", "op1")
		changed.PayloadHash = "other"
		changed.Target = "elsewhere"
		_, _, err = e.repo.RecordOperation(ctx(t), changed)
		require.ErrorIs(t, err, repository.ErrPayloadConflict)
		got := snapshot(t, e, "caller", "op1")
		require.Equal(t, "hash-op1", got.PayloadHash)
		require.Equal(t, "contacts", got.Target)
		require.Equal(t, int64(1), count(t, e.db, &models.Operation{}))
	})
}

func TestOperationBadInput(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "op1")
		op := snapshot(t, e, "caller", "op1")
		noHash, noIntent, badIntent := opInput("c", "x"), opInput("c", "y"), opInput("c", "z")
		noHash.PayloadHash = ""
		noIntent.ReissueIntent = nil
		badIntent.ReissueIntent = models.JSON(`{"a":`)
		status := int64(42)
		fence := repository.Fence{CallerDID: "caller", OperationID: "op1", LeaseToken: "t"}
		cases := []struct {
			name string
			call func() error
		}{
			{"record empty caller", func() error { _, _, err := e.repo.RecordOperation(ctx(t), opInput("", "x")); return err }},
			{"record empty hash", func() error { _, _, err := e.repo.RecordOperation(ctx(t), noHash); return err }},
			{"record no intent", func() error { _, _, err := e.repo.RecordOperation(ctx(t), noIntent); return err }},
			{"record malformed intent", func() error { _, _, err := e.repo.RecordOperation(ctx(t), badIntent); return err }},
			{"claim zero limit", func() error {
				_, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{LeaseFor: time.Minute})
				return err
			}},
			{"claim negative limit", func() error {
				_, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: -1, LeaseFor: time.Minute})
				return err
			}},
			{"claim zero lease", func() error {
				_, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1})
				return err
			}},
			{"heartbeat empty token", func() error {
				_, err := e.repo.HeartbeatOperation(ctx(t), repository.Fence{CallerDID: "caller", OperationID: "op1"}, time.Minute)
				return err
			}},
			{"heartbeat negative", func() error { _, err := e.repo.HeartbeatOperation(ctx(t), fence, -time.Second); return err }},
			{"failure no kind", func() error {
				_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: fence})
				return err
			}},
			{"failure bad status", func() error {
				_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: fence, Kind: "http", HTTPStatus: &status})
				return err
			}},
			{"commit malformed result", func() error {
				_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: fence, ResultEntity: models.JSON("[")})
				return err
			}},
			{"list zero limit", func() error {
				_, err := e.repo.ListOperationsByOwner(ctx(t), repository.ListOperationsParams{OwnerDID: "owner"})
				return err
			}},
			{"due zero now", func() error {
				_, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{ReadWinners: noWinners})
				return err
			}},
			{"due negative now", func() error {
				_, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: time.UnixMilli(-5), ReadWinners: noWinners})
				return err
			}},
			{"due no reader", func() error {
				_, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now()})
				return err
			}},
			{"due negative chunk", func() error {
				_, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners, ChunkSize: -1})
				return err
			}},
		}
		for _, tc := range cases {
			require.ErrorIs(t, tc.call(), repository.ErrInvalidInput, tc.name)
		}
		require.Equal(t, op, snapshot(t, e, "caller", "op1"), "bad input changed nothing")
		require.Equal(t, int64(1), count(t, e.db, &models.Operation{}))
	})
}

func TestListOperationsByOwnerPages(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		// b at t0; a and d at t1; c and e at t2: order is (created_at, caller, id).
		for i, id := range []string{"b", "a", "d", "c", "e"} {
			recordOp(t, e, "caller", id)
			if i%2 == 0 {
				e.clock.Advance(time.Millisecond)
			}
		}
		want := []string{"b", "a", "d", "c", "e"}
		var got []string
		var after *repository.OperationCursor
		for {
			page, err := e.repo.ListOperationsByOwner(ctx(t), repository.ListOperationsParams{OwnerDID: "owner", After: after, Limit: 2})
			require.NoError(t, err)
			for i := range page {
				got = append(got, page[i].OperationID)
			}
			if len(page) < 2 {
				break
			}
			after = repository.CursorOf(&page[len(page)-1])
		}
		require.Equal(t, want, got)
	})
}
