package integrationtest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

func status(v int64) *int64 { return &v }

// history reads an operation's attempt history through the admin API.
func history(t *testing.T, repo *repository.Repository, caller, id string) []models.OperationAttempt {
	t.Helper()
	h, err := repo.OperationAttempts(ctx(t), repository.OperationKey{CallerDID: caller, OperationID: id})
	require.NoError(t, err)
	return h
}

// TestDeadRecordsItsOwnCause: an operation that failed with a 503 until
// the backoff gave up, then was requeued and ended by its handler with
// worker.Dead("validation", 422), shows the 422 and its message, not the
// 503; the requeue cleared the earlier answer; the history keeps both.
func TestDeadRecordsItsOwnCause(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next,
			Backoff: &repository.ExponentialBackoff{Base: time.Second, Max: time.Second, MaxAttempts: 1}})
		require.NoError(t, err)
		recordOp(t, e, "caller", "op")
		var calls atomic.Int64
		pool, err := worker.New(repo, worker.Config{Concurrency: 1, Handler: func(context.Context, *models.Operation) worker.Result {
			if calls.Add(1) == 1 {
				return worker.Retry("http", status(503)).WithMessage("upstream\nunavailable")
			}
			return worker.Dead("validation", status(422)).WithMessage("field email:\tnot an address")
		}})
		require.NoError(t, err)
		key := repository.OperationKey{CallerDID: "caller", OperationID: "op"}
		deadAgain := func(n int64) func() bool {
			return func() bool {
				op, err := repo.GetOperation(ctx(t), key)
				return err == nil && op.State == models.OperationDead && calls.Load() == n
			}
		}
		runPoolWithin(t, pool, deadAgain(1), 30*time.Second)
		op := snapshot(t, e, "caller", "op")
		require.Equal(t, "http", *op.LastKind)
		require.Equal(t, int64(503), *op.LastHTTPStatus)
		require.Equal(t, "upstream unavailable", *op.LastMessage, "control characters made a space")

		requeued, err := repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: key, ResetAttempts: true})
		require.NoError(t, err)
		require.Nil(t, requeued.LastKind, "a requeue clears the earlier answer")
		require.Nil(t, requeued.LastHTTPStatus)
		require.Nil(t, requeued.LastMessage)
		require.Nil(t, requeued.LastAnswerAt)

		runPoolWithin(t, pool, deadAgain(2), 30*time.Second)
		op = snapshot(t, e, "caller", "op")
		require.Equal(t, "validation", *op.LastKind, "the death's own cause")
		require.Equal(t, int64(422), *op.LastHTTPStatus)
		require.Equal(t, "field email: not an address", *op.LastMessage)

		h := history(t, repo, "caller", "op")
		require.Len(t, h, 2)
		require.Equal(t, []string{"validation", "http"}, []string{*h[0].Kind, *h[1].Kind}, "newest first")
		require.Equal(t, []int64{422, 503}, []int64{*h[0].HTTPStatus, *h[1].HTTPStatus})
		require.Equal(t, []string{models.OperationDead, models.OperationDead}, []string{h[0].State, h[1].State})
		require.Equal(t, []int64{0, 1}, []int64{h[0].Attempts, h[1].Attempts})
	})
}

// TestDeadWithoutCauseClearsTheEarlierOne: a death with no cause given
// (MarkOperationDead, worker.Dead("", nil)) shows none, never the failure
// before it; a cancel shows "cancelled" without the earlier status.
func TestDeadWithoutCauseClearsTheEarlierOne(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "marked")
		recordOp(t, e, "caller", "cancelled")
		for _, op := range claim(t, e, 2, time.Minute) {
			_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&op),
				Kind: "http", HTTPStatus: status(503), Message: "down"})
			require.NoError(t, err)
		}
		e.clock.Advance(time.Hour)
		ops := claim(t, e, 2, time.Minute)
		require.Len(t, ops, 2)
		if ops[0].OperationID != "marked" {
			ops[0] = ops[1]
		}
		_, err := e.repo.MarkOperationDead(ctx(t), repository.FenceOf(&ops[0]))
		require.NoError(t, err)
		op := snapshot(t, e, "caller", "marked")
		require.Nil(t, op.LastKind)
		require.Nil(t, op.LastHTTPStatus)
		require.Nil(t, op.LastMessage)

		op2, err := e.repo.CancelOperation(ctx(t), repository.CancelParams{Force: true, OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "cancelled"}})
		require.NoError(t, err)
		require.Equal(t, repository.CancelledKind, *op2.LastKind)
		require.Nil(t, op2.LastHTTPStatus, "the 503 was an earlier attempt's")
		require.Nil(t, op2.LastMessage)
		h := history(t, e.repo, "caller", "cancelled")
		require.Len(t, h, 2)
		require.Equal(t, repository.CancelledKind, *h[0].Kind)
		require.Equal(t, "down", *h[1].Message)
	})
}

// TestAttemptHistoryIsBoundedCleanedAndLeavesWithItsOperation: 25 failures
// keep the newest 20 answers; a message is stored without control
// characters and cut to 500 bytes; a commit adds no answer; a batch
// records each row's own answer, and a bad item in it writes nothing;
// a batch of snoozes adds an answer for its pause only; a scoped
// repository does not read another owner's history; retention deletes the
// history with its operation.
func TestAttemptHistoryIsBoundedCleanedAndLeavesWithItsOperation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next,
			Backoff: &repository.ExponentialBackoff{Base: time.Second, Max: time.Second, MaxAttempts: 100}})
		require.NoError(t, err)
		recordOp(t, e, "caller", "flaky")
		long := "line one\r\nline two\x1b[2J\x00" + strings.Repeat("é", 600)
		for range 25 {
			ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			_, err = repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&ops[0]),
				Kind: "http", HTTPStatus: status(500), Message: long})
			require.NoError(t, err)
			e.clock.Advance(time.Second)
		}
		h := history(t, repo, "caller", "flaky")
		require.Len(t, h, models.AttemptHistoryLimit)
		require.Equal(t, int64(25), h[0].Attempts, "newest first")
		require.Equal(t, int64(6), h[len(h)-1].Attempts, "the oldest five were dropped")
		var stored int64
		require.NoError(t, e.db.Model(&models.OperationAttempt{}).Where("operation_id = ?", "flaky").Count(&stored).Error)
		require.Equal(t, int64(models.AttemptHistoryLimit), stored, "the table keeps no more than it shows")
		msg := *h[0].Message
		require.LessOrEqual(t, len(msg), 500)
		require.True(t, strings.HasPrefix(msg, "line one line two [2J é"), msg)
		require.True(t, strings.HasSuffix(msg, "…"))
		require.False(t, strings.ContainsFunc(msg, unicode.IsControl))
		require.Equal(t, msg, *snapshot(t, e, "caller", "flaky").LastMessage)

		// A commit adds nothing.
		recordOp(t, e, "caller", "fine")
		e.clock.Advance(time.Hour)
		ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 2)
		byID := map[string]repository.Fence{}
		for i := range ops {
			byID[ops[i].OperationID] = repository.FenceOf(&ops[i])
		}
		_, err = repo.CommitOperation(ctx(t), repository.CommitParams{Fence: byID["fine"]})
		require.NoError(t, err)
		require.Empty(t, history(t, repo, "caller", "fine"))

		// Batches: each row its own answer; a poison item writes nothing.
		for _, id := range []string{"b1", "b2", "b3"} {
			recordOp(t, e, "caller", id)
		}
		_, err = repo.ReleaseOperations(ctx(t), []repository.Fence{byID["flaky"]})
		require.NoError(t, err)
		ops, err = repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 4)
		for i := range ops {
			byID[ops[i].OperationID] = repository.FenceOf(&ops[i])
		}
		_, err = repo.FinishOperationsWith(ctx(t), []repository.FinishParams{
			{Fence: byID["b1"], Kind: "validation", HTTPStatus: status(422)},
			{Fence: byID["b2"], Kind: "gone", HTTPStatus: status(700)},
		}, models.OperationDead)
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.Equal(t, models.OperationAttempted, snapshot(t, e, "caller", "b1").State, "nothing written")
		require.Empty(t, history(t, repo, "caller", "b1"))
		out, err := repo.FinishOperationsWith(ctx(t), []repository.FinishParams{
			{Fence: byID["b1"], Kind: "validation", HTTPStatus: status(422), Message: "bad email"},
			{Fence: byID["b2"], Kind: "gone", HTTPStatus: status(410)},
		}, models.OperationDead)
		require.NoError(t, err)
		require.Len(t, out, 2)
		b1, b2 := snapshot(t, e, "caller", "b1"), snapshot(t, e, "caller", "b2")
		require.Equal(t, []any{"validation", int64(422), "bad email"}, []any{*b1.LastKind, *b1.LastHTTPStatus, *b1.LastMessage})
		require.Equal(t, []any{"gone", int64(410)}, []any{*b2.LastKind, *b2.LastHTTPStatus})
		require.Nil(t, b2.LastMessage)
		require.Len(t, history(t, repo, "caller", "b1"), 1)

		// Snoozes: the pause records an answer, the plain snooze beside it
		// in the same statement does not.
		until := e.clock.Now().Add(time.Minute)
		_, err = repo.SnoozeOperations(ctx(t), []repository.SnoozeParams{
			{Fence: byID["b3"], Until: until, PauseAccount: true, Kind: "rate_limited", HTTPStatus: status(429), Message: "slow down"},
			{Fence: byID["flaky"], Until: until},
		})
		require.NoError(t, err)
		require.Len(t, history(t, repo, "caller", "b3"), 1)
		require.Equal(t, "slow down", *history(t, repo, "caller", "b3")[0].Message)
		require.Len(t, history(t, repo, "caller", "flaky"), models.AttemptHistoryLimit)
		require.Equal(t, int64(25), history(t, repo, "caller", "flaky")[0].Attempts, "no answer added by the plain snooze")

		// A scoped repository reads only its owner's history.
		other, err := repo.WithScopes(ctx(t), scopes.Owner("someone-else"))
		require.NoError(t, err)
		_, err = other.OperationAttempts(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "b1"})
		require.ErrorIs(t, err, repository.ErrNotFound)

		// Retention deletes the history with the operation.
		e.clock.Advance(365 * 24 * time.Hour)
		_, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: 100})
		require.NoError(t, err)
		_, err = repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "b1"})
		require.ErrorIs(t, err, repository.ErrNotFound, "collected")
		require.Zero(t, count(t, e.db, &models.OperationAttempt{}, "operation_id IN ?", []string{"b1", "b2"}))
		require.NotZero(t, count(t, e.db, &models.OperationAttempt{}, "operation_id = ?", "flaky"), "a live operation keeps its own")
	})
}

// TestTwoAnswersInOneMillisecondAreTwo: a failure and then a pause of the
// same operation in one millisecond (a backoff under a millisecond) are
// two answers in the history, the newest the journal's own.
func TestTwoAnswersInOneMillisecondAreTwo(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next,
			Backoff: &repository.ExponentialBackoff{Base: time.Microsecond, Max: time.Microsecond, MaxAttempts: 100}})
		require.NoError(t, err)
		recordOp(t, e, "caller", "op")
		ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		_, err = repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&ops[0]),
			Kind: "http", HTTPStatus: status(503), Message: "down"})
		require.NoError(t, err)
		ops, err = repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1, "due again at once")
		_, err = repo.SnoozeOperations(ctx(t), []repository.SnoozeParams{{Fence: repository.FenceOf(&ops[0]),
			Until: e.clock.Now().Add(time.Minute), PauseAccount: true, Kind: "rate_limited", HTTPStatus: status(429)}})
		require.NoError(t, err)
		require.Equal(t, "rate_limited", *snapshot(t, e, "caller", "op").LastKind)
		h := history(t, repo, "caller", "op")
		require.Len(t, h, 2, "both answers kept")
		require.Equal(t, []string{"rate_limited", "http"}, []string{*h[0].Kind, *h[1].Kind})

		// An application's own write of the row as read adds none.
		op := snapshot(t, e, "caller", "op")
		require.NoError(t, e.db.Model(&models.Operation{}).Where("caller_did = ? AND operation_id = ?", "caller", "op").
			Updates(map[string]any{"last_answer_at": *op.LastAnswerAt, "last_kind": *op.LastKind}).Error)
		require.Len(t, history(t, repo, "caller", "op"), 2)
	})
}

// TestClaimAfterCancelAndRequeueIsNotFirst: an operation claimed, force
// cancelled and requeued with its attempts reset is not reported as a
// first claim (its pickup would count the time it lay dead).
func TestClaimAfterCancelAndRequeueIsNotFirst(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "op-1")
		e.clock.Advance(time.Second)
		require.Len(t, claim(t, e, 1, time.Minute), 1)
		key := repository.OperationKey{CallerDID: "caller", OperationID: "op-1"}
		_, err := e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key, Force: true})
		require.NoError(t, err)
		e.clock.Advance(24 * time.Hour)
		_, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: key, ResetAttempts: true})
		require.NoError(t, err)
		var mu sync.Mutex
		var got []worker.Finished
		pool, err := worker.New(e.repo, worker.Config{Concurrency: 1,
			Handler:    func(context.Context, *models.Operation) worker.Result { return worker.Commit(nil, nil, nil) },
			OnFinished: func(f worker.Finished) { mu.Lock(); got = append(got, f); mu.Unlock() }})
		require.NoError(t, err)
		runPool(t, pool, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
		mu.Lock()
		defer mu.Unlock()
		require.False(t, got[0].FirstClaim, "claimed before its cancel; pickup %v", got[0].Pickup)
	})
}
