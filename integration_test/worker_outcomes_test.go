package integrationtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// runPoolWithin is runPool with a bound on how long Run may take to return
// after cancellation; it returns the stats and that time.
func runPoolWithin(t *testing.T, pool *worker.Pool, stop func() bool, bound time.Duration) (worker.Stats, time.Duration) {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(c) }()
	require.Eventually(t, stop, 30*time.Second, 5*time.Millisecond)
	cancel()
	cancelled := time.Now()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(bound + 30*time.Second):
		t.Fatalf("Run did not return %v after cancellation", bound+30*time.Second)
	}
	took := time.Since(cancelled)
	require.LessOrEqual(t, took, bound, "Run returned within its bound after cancellation")
	return pool.Stats(), took
}

// logged reports the records at level whose attributes include
// operation=op.
func (h *recordingHandler) logged(level slog.Level, op string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		if r.Level != level {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "operation" && a.Value.String() == op {
				out = append(out, r)
			}
			return true
		})
	}
	return out
}

// attr is the value of key in r, or "".
func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
		}
		return true
	})
	return v
}

// TestWorkerPoisonResult: one result the store refuses, among 50 good
// ones, is that operation's own outcome (a refused commit dead, anything
// else a failed attempt of kind invalid_result), logged at Error with its
// key; the other 49 are committed and Run returns promptly after
// cancellation. Before, the whole batch was retried forever.
func TestWorkerPoisonResult(t *testing.T) {
	t.Parallel()
	status := func(v int64) *int64 { return &v }
	cases := []struct {
		name     string
		linkDoc  bool // the poison operation was recorded with document doc-A
		result   worker.Result
		wantDead bool
	}{
		{name: "retry with status 0", result: worker.Retry("network", status(0))},
		{name: "retry with status 999", result: worker.Retry("http", status(999))},
		{name: "retry without a kind", result: worker.Retry("", nil)},
		{name: "retry with a kind that is not UTF-8", result: worker.Retry("bad\xff", nil)},
		{name: "retry at the zero time", result: worker.RetryAt("http", status(429), time.Time{})},
		{name: "snooze for nothing", result: worker.Snooze(0)},
		{name: "the zero result", result: worker.Result{}},
		{name: "commit with an empty document id", result: worker.Commit(models.StrPtr(""), nil, nil), wantDead: true},
		{name: "commit with an etag that is not UTF-8", result: worker.Commit(nil, models.StrPtr("\xff\xfe"), nil), wantDead: true},
		{name: "commit with a NUL in the etag", result: worker.Commit(nil, models.StrPtr("a\x00b"), nil), wantDead: true},
		{name: "commit with invalid JSON", result: worker.Commit(nil, nil, models.JSON(`{"a":`)), wantDead: true},
		{name: "commit naming another document", linkDoc: true, result: worker.Commit(models.StrPtr("doc-B"), nil, nil), wantDead: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachDB(t, func(t *testing.T, e *env) {
				seedDue(t, e, 50)
				const poison = "op-000007"
				if tc.linkDoc {
					require.NoError(t, e.db.Model(&models.Operation{}).Where("operation_id = ?", poison).
						UpdateColumn("document_id", "doc-A").Error)
				}
				h := &recordingHandler{}
				pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 8, BatchSize: 50,
					ShutdownGrace: 200 * time.Millisecond, FlushTimeout: 500 * time.Millisecond, Logger: slog.New(h),
					Handler: func(_ context.Context, op *models.Operation) worker.Result {
						if op.OperationID == poison {
							return tc.result
						}
						return worker.Commit(nil, nil, nil)
					}})
				require.NoError(t, err)
				stats, _ := runPoolWithin(t, pool, func() bool {
					return stateCount(t, e, models.OperationCommitted) == 49 &&
						count(t, e.db, &models.Operation{}, "operation_id = ? AND lease_token IS NULL AND (state = ? OR attempts = 1)",
							poison, models.OperationDead) == 1
				}, 2*time.Second)
				op := snapshot(t, e, "caller", poison)
				if tc.wantDead {
					require.Equal(t, models.OperationDead, op.State, "a refused commit ends dead")
					require.Zero(t, op.Attempts)
					require.Equal(t, int64(1), stats.Dead)
				} else {
					require.Equal(t, models.OperationAttempted, op.State)
					require.Equal(t, int64(1), op.Attempts)
					require.Equal(t, worker.KindInvalidResult, *op.LastKind)
					require.Nil(t, op.LastHTTPStatus)
					require.Equal(t, int64(1), stats.Retried)
				}
				if tc.linkDoc {
					require.Equal(t, "doc-A", *op.DocumentID, "the recorded document is kept")
				}
				require.Equal(t, int64(49), stats.Committed)
				require.Equal(t, int64(1), stats.Refused)
				require.Zero(t, stats.LeaseLost, "a refusal is not a lost lease")
				require.Zero(t, stats.Unrecorded)
				errs := h.logged(slog.LevelError, "caller/"+poison)
				require.Len(t, errs, 1, "the refusal is logged at Error with the operation's key")
				require.Contains(t, attr(errs[0], "err"), "invalid input")
			})
		})
	}
}

// TestWorkerConfigRefused: impossible configurations are ErrInvalidInput
// from New; a second Run while one runs is ErrAlreadyRunning.
func TestWorkerConfigRefused(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *models.Operation) worker.Result { return worker.Dead("validation", nil) }
	forEachDB(t, func(t *testing.T, e *env) {
		repo := realRepo(t, e)
		for name, cfg := range map[string]worker.Config{
			"no handler":                     {},
			"heartbeat as long as the lease": {Handler: h, LeaseFor: time.Second, HeartbeatEvery: time.Second},
			"heartbeat longer than lease":    {Handler: h, LeaseFor: time.Second, HeartbeatEvery: 2 * time.Second},
			"heartbeat just under the lease": {Handler: h, LeaseFor: 100 * time.Millisecond, HeartbeatEvery: 99 * time.Millisecond},
			"default lease, long heartbeat":  {Handler: h, HeartbeatEvery: 2 * time.Minute},
			"negative concurrency":           {Handler: h, Concurrency: -1},
			"negative batch":                 {Handler: h, BatchSize: -1},
			"negative lease":                 {Handler: h, LeaseFor: -time.Second},
			"negative poll":                  {Handler: h, PollInterval: -time.Second},
			"negative grace":                 {Handler: h, ShutdownGrace: -1},
			"negative flush timeout":         {Handler: h, FlushTimeout: -1},
			"negative handler timeout":       {Handler: h, HandlerTimeout: -1},
			"negative flush interval":        {Handler: h, FlushEvery: -1},
			"negative cooldown":              {Handler: h, FetchCooldown: -1},
		} {
			_, err := worker.New(repo, cfg)
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
		}
		_, err := worker.New(nil, worker.Config{Handler: h})
		require.ErrorIs(t, err, repository.ErrInvalidInput)

		seedDue(t, e, 1)
		started := make(chan struct{})
		pool, err := worker.New(repo, worker.Config{PollInterval: time.Millisecond,
			Handler: func(context.Context, *models.Operation) worker.Result {
				close(started)
				return worker.Dead("validation", nil)
			}})
		require.NoError(t, err)
		c, cancel := context.WithCancel(ctx(t))
		first := make(chan error, 1)
		go func() { first <- pool.Run(c) }()
		<-started // the first Run is running
		second := make(chan error, 1)
		go func() { second <- pool.Run(c) }()
		select {
		case err := <-second:
			require.ErrorIs(t, err, worker.ErrAlreadyRunning)
		case <-time.After(5 * time.Second):
			cancel()
			t.Fatal("a second Run was not refused: it ran beside the first")
		}
		cancel()
		require.NoError(t, <-first)
		c2, cancel2 := context.WithCancel(ctx(t))
		cancel2()
		require.NoError(t, pool.Run(c2), "once the first returned, the pool runs again")
	})
}

// TestWorkerPanicLoggedWithStack: a panic in the application's code, the
// handler or HandlerTimeoutFor, is that operation's outcome: a retryable
// failure of kind panic, counted, and logged at Error with its stack; the
// process goes on and the other operations run as usual.
func TestWorkerPanicLoggedWithStack(t *testing.T) {
	t.Parallel()
	commit := func(context.Context, *models.Operation) worker.Result { return worker.Commit(nil, nil, nil) }
	for _, tc := range []struct {
		name, panicking, message, frame string
		cfg                             worker.Config
		committed                       int64 // of the two operations; the others panic
	}{
		{name: "in the handler", panicking: "op-000000", message: "handler bug", frame: "panicInHandler",
			cfg: worker.Config{Handler: func(context.Context, *models.Operation) worker.Result {
				panicInHandler()
				return worker.Dead("validation", nil)
			}}},
		{name: "in HandlerTimeoutFor", panicking: "op-000001", message: "timeout lookup bug", frame: "panicInTimeoutFor", committed: 1,
			cfg: worker.Config{Handler: commit, HandlerTimeoutFor: func(op *models.Operation) time.Duration {
				if op.OperationID == "op-000001" {
					panicInTimeoutFor()
				}
				return 0
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, e *env) {
				seedDue(t, e, 2)
				h := &recordingHandler{}
				cfg := tc.cfg
				cfg.Logger = slog.New(h)
				pool, err := worker.New(realRepo(t, e), cfg)
				require.NoError(t, err)
				stats := runPool(t, pool, func() bool {
					return count(t, e.db, &models.Operation{}, "lease_token IS NULL AND (state = ? OR attempts = 1)", models.OperationCommitted) == 2
				})
				require.Equal(t, 2-tc.committed, stats.Panicked)
				require.Equal(t, 2-tc.committed, stats.Retried)
				require.Equal(t, tc.committed, stats.Committed)
				require.Equal(t, worker.KindPanic, *snapshot(t, e, "caller", tc.panicking).LastKind)
				errs := h.logged(slog.LevelError, "caller/"+tc.panicking)
				require.Len(t, errs, 1)
				require.Equal(t, tc.message, attr(errs[0], "panic"))
				require.Contains(t, attr(errs[0], "stack"), tc.frame, "the stack names the panicking function")
			})
		})
	}
}

func panicInHandler() { panic("handler bug") }

func panicInTimeoutFor() { panic("timeout lookup bug") }

// TestWorkerHandlerTimeout: a handler past HandlerTimeout (or its
// operation's HandlerTimeoutFor) has its context cancelled and its attempt
// recorded as a failure of kind timeout; a handler that commits anyway is
// committed; operations without a bound run to the end.
func TestWorkerHandlerTimeout(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 3)
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 3, HandlerTimeout: 50 * time.Millisecond,
			HandlerTimeoutFor: func(op *models.Operation) time.Duration {
				if op.OperationID == "op-000002" {
					return time.Hour // its own bound, longer than the pool's
				}
				return 0
			},
			Handler: func(ctx context.Context, op *models.Operation) worker.Result {
				switch op.OperationID {
				case "op-000000":
					<-ctx.Done()
					return worker.Retry("cancelled", nil)
				case "op-000001":
					<-ctx.Done()
					return worker.Commit(nil, nil, nil) // the write landed after all
				}
				select {
				case <-ctx.Done():
					return worker.Retry("cut short", nil)
				case <-time.After(200 * time.Millisecond):
					return worker.Commit(nil, nil, nil)
				}
			}})
		require.NoError(t, err)
		stats := runPool(t, pool, func() bool {
			return count(t, e.db, &models.Operation{}, "lease_token IS NULL AND (state = ? OR attempts = 1)", models.OperationCommitted) == 3
		})
		timedOut := snapshot(t, e, "caller", "op-000000")
		require.Equal(t, int64(1), timedOut.Attempts)
		require.Equal(t, worker.KindTimeout, *timedOut.LastKind)
		require.Equal(t, models.OperationCommitted, snapshot(t, e, "caller", "op-000001").State)
		require.Equal(t, models.OperationCommitted, snapshot(t, e, "caller", "op-000002").State, "its own bound applied")
		require.Equal(t, int64(1), stats.TimedOut)
		require.Equal(t, int64(2), stats.Committed)
		require.Equal(t, int64(1), stats.Retried)
	})
}

// TestWorkerSnoozeAndRetryAfter: a snooze puts the operation off as asked
// without counting an attempt; a Retry-After later than the backoff moves
// the next attempt to it, an earlier one does not shorten the backoff.
func TestWorkerSnoozeAndRetryAfter(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedDue(t, e, 3)
		retryAfter := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		status := int64(429)
		pool, err := worker.New(realRepo(t, e), worker.Config{Concurrency: 3,
			Handler: func(_ context.Context, op *models.Operation) worker.Result {
				switch op.OperationID {
				case "op-000000":
					return worker.Snooze(30 * time.Minute)
				case "op-000001":
					return worker.RetryAt("rate_limited", &status, retryAfter)
				}
				return worker.RetryAt("rate_limited", &status, time.Now().Add(-time.Hour)) // already passed
			}})
		require.NoError(t, err)
		before := time.Now()
		stats := runPool(t, pool, func() bool {
			return count(t, e.db, &models.Operation{}, "lease_token IS NULL AND ended_lease_token IS NOT NULL") == 3
		})
		after := time.Now()
		snoozed := snapshot(t, e, "caller", "op-000000")
		require.Zero(t, snoozed.Attempts, "a snooze is not an attempt")
		require.Nil(t, snoozed.LastKind)
		require.Equal(t, models.OperationAttempted, snoozed.State)
		require.GreaterOrEqual(t, *snoozed.NextAttemptAt, before.Add(30*time.Minute).UnixMilli())
		require.LessOrEqual(t, *snoozed.NextAttemptAt, after.Add(30*time.Minute).UnixMilli())
		limited := snapshot(t, e, "caller", "op-000001")
		require.Equal(t, int64(1), limited.Attempts)
		require.Equal(t, retryAfter.UnixMilli(), *limited.NextAttemptAt, "the provider's time, later than the backoff's")
		passed := snapshot(t, e, "caller", "op-000002")
		require.GreaterOrEqual(t, *passed.NextAttemptAt, before.Add(800*time.Millisecond).UnixMilli(),
			"the backoff (1 s ± 20%) is not shortened by an earlier Retry-After")
		require.Equal(t, int64(1), stats.Snoozed)
		require.Equal(t, int64(2), stats.Retried)
	})
}

// TestSnoozeOperation: the store's snooze, single and batched: attempts
// and the last failure kept, the lease ended, a retry a replay, a stale
// fence refused, a zero time invalid.
func TestSnoozeOperation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, id := range []string{"a", "b", "c"} {
			recordOp(t, e, "caller", id)
		}
		ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 3)
		until := e.clock.At(time.Hour)
		p := repository.SnoozeParams{Fence: repository.FenceOf(&ops[0]), Until: until}
		w, err := e.repo.SnoozeOperation(ctx(t), p)
		require.NoError(t, err)
		require.False(t, w.Replay)
		require.Equal(t, until.UnixMilli(), *w.NextAttemptAt)
		require.Nil(t, w.LeaseToken)
		require.Zero(t, w.Attempts)
		again, err := e.repo.SnoozeOperation(ctx(t), p)
		require.NoError(t, err)
		require.True(t, again.Replay, "a retry after a lost reply")
		_, err = e.repo.SnoozeOperation(ctx(t), repository.SnoozeParams{Fence: p.Fence, Until: until.Add(time.Minute)})
		require.ErrorIs(t, err, repository.ErrLeaseLost, "another snooze by an ended lease")
		_, err = e.repo.SnoozeOperation(ctx(t), repository.SnoozeParams{Fence: repository.FenceOf(&ops[1])})
		require.ErrorIs(t, err, repository.ErrInvalidInput)

		out, err := e.repo.SnoozeOperations(ctx(t), []repository.SnoozeParams{
			{Fence: repository.FenceOf(&ops[1]), Until: until}, {Fence: repository.FenceOf(&ops[2]), Until: until.Add(time.Hour)}})
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		require.NoError(t, out[1].Err)
		require.Equal(t, until.Add(time.Hour).UnixMilli(), *out[1].Write.NextAttemptAt)
		_, err = e.repo.SnoozeOperations(ctx(t), []repository.SnoozeParams{{Fence: repository.FenceOf(&ops[1]), Until: until}, {}})
		require.ErrorIs(t, err, repository.ErrInvalidInput)

		claimed, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Empty(t, claimed, "snoozed operations are not due")
		e.clock.Advance(time.Hour)
		claimed, err = e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 2, "due again at their time")

		// After a counted failure, a snooze keeps the attempts and the
		// failure's kind and status as they are.
		status := int64(503)
		_, err = e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&claimed[0]), Kind: "http", HTTPStatus: &status})
		require.NoError(t, err)
		e.clock.Advance(24 * time.Hour)
		again2, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
		require.NoError(t, err)
		var failed *models.Operation
		for i := range again2 {
			if again2[i].OperationID == claimed[0].OperationID {
				failed = &again2[i]
			}
		}
		require.NotNil(t, failed, "the failed operation is due again")
		w, err = e.repo.SnoozeOperation(ctx(t), repository.SnoozeParams{Fence: repository.FenceOf(failed), Until: e.clock.At(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, int64(1), w.Attempts, "a snooze is not an attempt")
		require.Equal(t, "http", *w.LastKind)
		require.Equal(t, status, *w.LastHTTPStatus)
	})
}

// TestOperationRunAt: an operation recorded with NotBefore is claimed by
// no claim before that time, single and batched; a replay keeps the stored
// time; the zero time is invalid.
func TestOperationRunAt(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		at := e.clock.At(time.Hour)
		in := opInput("caller", "later")
		in.NotBefore = &at
		_, _, err := e.repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
		batch := []repository.OperationInput{opInput("caller", "b1"), opInput("caller", "b2")}
		batch[0].NotBefore = &at
		_, err = e.repo.RecordOperations(ctx(t), batch)
		require.NoError(t, err)
		sooner := e.clock.At(time.Minute)
		in.NotBefore = &sooner
		_, created, err := e.repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
		require.False(t, created)

		claim := func() []string {
			ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: 24 * time.Hour})
			require.NoError(t, err)
			ids := make([]string, len(ops))
			for i := range ops {
				ids[i] = ops[i].OperationID
			}
			return ids
		}
		require.Equal(t, []string{"b2"}, claim())
		e.clock.Advance(59 * time.Minute)
		require.Empty(t, claim(), "a replay did not move the time forward")
		e.clock.Advance(time.Minute)
		require.ElementsMatch(t, []string{"later", "b1"}, claim())

		zero := time.Time{}
		bad := opInput("caller", "zero")
		bad.NotBefore = &zero
		_, _, err = e.repo.RecordOperation(ctx(t), bad)
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		_, err = e.repo.RecordOperations(ctx(t), []repository.OperationInput{opInput("caller", "ok"), bad})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.Zero(t, count(t, e.db, &models.Operation{}, "operation_id IN ?", []string{"ok", "zero"}))
	})
}

// TestWorkerRunAtNotEarly: a pool polling every millisecond does not start
// an operation before its run-at time.
func TestWorkerRunAtNotEarly(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo := realRepo(t, e)
		at := time.Now().Add(400 * time.Millisecond)
		in := opInput("caller", "scheduled")
		in.NotBefore = &at
		_, _, err := repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
		started := make(chan time.Time, 1)
		pool, err := worker.New(repo, worker.Config{PollInterval: time.Millisecond,
			Handler: func(context.Context, *models.Operation) worker.Result {
				started <- time.Now()
				return worker.Commit(nil, nil, nil)
			}})
		require.NoError(t, err)
		runPool(t, pool, func() bool { return stateCount(t, e, models.OperationCommitted) == 1 })
		require.False(t, (<-started).Before(at.Truncate(time.Millisecond)), "started at or after its time")
	})
}

// keysOf names operations as the pool logs them.
func keysOf(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("caller/%s", id)
	}
	return out
}

// loggedKeys is every operation key logged at level.
func (h *recordingHandler) loggedKeys(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level == level {
			if k := attr(r, "operation"); k != "" && strings.Contains(k, "/") {
				out = append(out, k)
			}
		}
	}
	return out
}
