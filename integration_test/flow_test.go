package integrationtest

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestFlowFairClaims: one account with a 20,000-operation backlog and 100
// accounts with 10 each, all due, fairness on for the connector (no other
// limit), one pool of Concurrency 32 with handlers of equal duration:
// every small account's operation finishes before the big account's
// 3,000th does. Without fairness the big account's backlog, older, went
// first.
func TestFlowFairClaims(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo := realRepo(t, e)
		require.NoError(t, repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, repository.AccountLimits{Fair: true}))
		base := time.Now().Add(-time.Hour).UnixMilli()
		seedAccount(t, e, "big", "big", 20_000, base)
		for i := range 100 {
			seedAccount(t, e, "small"+string(rune('a'+i/26))+string(rune('a'+i%26)), "s"+string(rune('a'+i/26))+string(rune('a'+i%26)), 10, base+30_000)
		}
		var big, small atomic.Int64
		var bigAtLastSmall atomic.Int64
		pool, err := worker.New(repo, worker.Config{Concurrency: 32, BatchSize: 64,
			Handler: func(_ context.Context, op *models.Operation) worker.Result {
				time.Sleep(time.Millisecond)
				if op.AccountKey == "big" {
					big.Add(1)
				} else if small.Add(1) == 1000 {
					bigAtLastSmall.Store(big.Load())
				}
				return worker.Commit(nil, nil, nil)
			}})
		require.NoError(t, err)
		runPool(t, pool, func() bool { return small.Load() == 1000 })
		t.Logf("the big account had %d finished when the last small one finished", bigAtLastSmall.Load())
		require.Less(t, bigAtLastSmall.Load(), int64(3000))
	})
}

// TestFlowCapAcrossInstances: two application instances (two handles, two
// repositories) run three pools on one database with a cap of 3 on one
// account: the handlers' own count of running calls never passes 3; leases
// a killed instance left behind hold their slots until they expire, then
// free them.
func TestFlowCapAcrossInstances(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		a, b := realRepo(t, e), secondRepo(t, e)
		acct := repository.AccountKey{ConnectorName: "crm", AccountKey: "capped"}
		require.NoError(t, a.SetAccountLimits(ctx(t), acct, repository.AccountLimits{MaxInFlight: 3}))
		seedAccount(t, e, "capped", "c", 3000, time.Now().Add(-time.Minute).UnixMilli())

		// A killed instance: three leases taken and never finished.
		dead, err := b.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: 2 * time.Second})
		require.NoError(t, err)
		require.Len(t, dead, 3, "the cap bounds a single claim too")
		killedAt := time.Now()

		var running, peak, done atomic.Int64
		var firstStart atomic.Int64
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			firstStart.CompareAndSwap(0, time.Now().UnixNano())
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			// Durations that differ, so leases end one at a time and a
			// claim meets an account with some slots still held.
			time.Sleep(time.Duration(1+len(op.OperationID)*int(op.OperationID[len(op.OperationID)-1])%13) * time.Millisecond)
			running.Add(-1)
			done.Add(1)
			return worker.Commit(nil, nil, nil)
		}
		var pools []*worker.Pool
		for _, repo := range []*repository.Repository{a, b, a} {
			p, err := worker.New(repo, worker.Config{Concurrency: 8, BatchSize: 8, LeaseFor: 30 * time.Second,
				PollInterval: 20 * time.Millisecond, Handler: handler})
			require.NoError(t, err)
			pools = append(pools, p)
		}
		runPools(t, 6*time.Second, pools...)
		started := time.Unix(0, firstStart.Load())
		t.Logf("%d finished; peak %d running; first start %v after the kill", done.Load(), peak.Load(), started.Sub(killedAt))
		require.LessOrEqual(t, peak.Load(), int64(3), "never more than the cap at once")
		// Served at its cap, not below it: all three slots were used at once,
		// and reused (how often is the machine's speed: a benchmark's figure).
		require.Equal(t, int64(3), peak.Load(), "the account is served at its cap")
		require.Greater(t, done.Load(), int64(30), "slots freed by finishes are taken again")
		require.GreaterOrEqual(t, started.Sub(killedAt), 1500*time.Millisecond, "the killed leases held their slots until they expired")
	})
}

// TestFlowRateAcrossInstances: a rate of 20 a second with a burst of 5,
// three pools on two instances for 6 s: no window of one second sees more
// than 25 starts, and the long-run rate is within 10% of the limit.
func TestFlowRateAcrossInstances(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		a, b := realRepo(t, e), secondRepo(t, e)
		acct := repository.AccountKey{ConnectorName: "crm", AccountKey: "rated"}
		require.NoError(t, a.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Rate: 20, Period: time.Second, Burst: 5}))
		seedAccount(t, e, "rated", "r", 2000, time.Now().Add(-time.Minute).UnixMilli())
		st := newStarts()
		var mu sync.Mutex
		var leased []int64 // the claim's now of each start's lease (ms)
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			st.start(op.AccountKey)
			mu.Lock()
			leased = append(leased, *op.LeaseExpiresAt-flowLeaseFor.Milliseconds())
			mu.Unlock()
			return worker.Commit(nil, nil, nil)
		}
		var pools []*worker.Pool
		for _, repo := range []*repository.Repository{a, b, b} {
			p, err := worker.New(repo, worker.Config{Concurrency: 8, BatchSize: 8, LeaseFor: flowLeaseFor,
				PollInterval: 50 * time.Millisecond, Handler: handler})
			require.NoError(t, err)
			pools = append(pools, p)
		}
		const run = 6 * time.Second
		began := time.Now()
		runPools(t, run, pools...)
		at := st.at["rated"]
		// The claims: no window of a second leases more than the burst and
		// a second's rate (GCRA's bound, exact).
		slices.Sort(leased)
		for i := range leased {
			require.LessOrEqual(t, inWindow(leased, i, 1000), 25, "leases in the second from %d ms", leased[i]-leased[0])
		}
		// The starts: a handler starts after its lease, later by the pool's
		// and this machine's scheduling; a start late by d lets a window see
		// up to rate × d more than the claims' bound, never more.
		startMs := make([]int64, len(at))
		for i := range at {
			startMs[i] = at[i].UnixMilli()
		}
		late := lateness(t, startMs, leased)
		slack := int(math.Ceil(20 * late.Seconds()))
		for i := range startMs {
			require.LessOrEqual(t, inWindow(startMs, i, 1000), 25+slack, "starts in the second from %v (slack %d for starts up to %v late)",
				at[i].Sub(began), slack, late)
		}
		elapsed := at[len(at)-1].Sub(began).Seconds()
		rate := float64(len(at)-5) / elapsed // the burst aside
		t.Logf("%d starts in %.2f s: %.1f a second; starts up to %v after their leases", len(at), elapsed, rate, late)
		require.InDelta(t, 20, rate, 2, "the limit is a ceiling, not a brake")
	})
}

// TestFlowPauseOnRetryAfter: a handler answers its account's first
// operation with PauseAccount for 2 s: no other operation of that account
// starts on any instance in those 2 s, another account keeps running, the
// paused operation's attempts are unchanged and it is due at the pause's
// end; ResumeAccount ends a pause at once.
func TestFlowPauseOnRetryAfter(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		// When the pause was written (its event follows its commit): a claim
		// whose now is after it sees it.
		obs := &recordingObserver{}
		a, err := repository.New(e.db, repository.Options{Observer: obs})
		require.NoError(t, err)
		b, err := dbtest.Install(ctx(t), openDSN(t, e.kind, e.dsn), nil, repository.Options{Observer: obs})
		require.NoError(t, err)
		seedAccount(t, e, "limited", "l", 200, time.Now().Add(-time.Minute).UnixMilli())
		seedAccount(t, e, "other", "o", 200, time.Now().Add(-time.Minute).UnixMilli())
		st := newStarts()
		var pausedAt atomic.Int64
		var pausedID atomic.Value
		var mu sync.Mutex
		var leasedLimited []int64 // the claim's now of each lease of the paused account (ms)
		status := int64(429)
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			st.start(op.AccountKey)
			if op.AccountKey == "limited" {
				mu.Lock()
				leasedLimited = append(leasedLimited, *op.LeaseExpiresAt-flowLeaseFor.Milliseconds())
				mu.Unlock()
			}
			if op.AccountKey == "limited" && pausedAt.CompareAndSwap(0, time.Now().UnixNano()) {
				pausedID.Store(op.OperationID)
				return worker.PauseAccount("rate_limited", &status, time.Now().Add(2*time.Second))
			}
			time.Sleep(2 * time.Millisecond)
			return worker.Commit(nil, nil, nil)
		}
		var pools []*worker.Pool
		for _, repo := range []*repository.Repository{a, b} {
			p, err := worker.New(repo, worker.Config{Concurrency: 1, BatchSize: 1, LeaseFor: flowLeaseFor,
				PollInterval: 20 * time.Millisecond, Handler: handler})
			require.NoError(t, err)
			pools = append(pools, p)
		}
		runPools(t, 1800*time.Millisecond, pools...)
		require.NotZero(t, pausedAt.Load())
		paused := time.Unix(0, pausedAt.Load())
		op, err := a.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: pausedID.Load().(string)})
		require.NoError(t, err)
		// No claim on either instance leased the account from the pause's
		// write to its end. (A lease taken before the write may start after
		// it: the pool had it already; the claims are what the pause stops.)
		pauseEvent := obs.firstAt(repository.EventAccountPaused)
		require.False(t, pauseEvent.IsZero(), "the pause was reported")
		written := pauseEvent.UnixMilli()
		st.mu.Lock()
		others := len(st.at["other"])
		st.mu.Unlock()
		mu.Lock()
		var during int
		for _, at := range leasedLimited {
			if at >= written && at < written+2000 {
				during++
			}
		}
		mu.Unlock()
		t.Logf("pause written %d ms after the handler returned it", written-paused.UnixMilli())
		require.Zero(t, during, "no operation of the paused account leased during its pause")
		require.Greater(t, others, 50, "the other account kept running")
		require.Zero(t, op.Attempts, "the pause is not a failed attempt")
		require.Equal(t, "rate_limited", *op.LastKind)
		require.EqualValues(t, 429, *op.LastHTTPStatus)
		require.True(t, op.Flow)

		accounts, err := a.ListAccounts(ctx(t), repository.ListAccountsParams{PausedOnly: true, Limit: 10})
		require.NoError(t, err)
		require.Len(t, accounts, 1)
		require.Equal(t, "limited", accounts[0].AccountKey.AccountKey)
		require.NoError(t, a.ResumeAccount(ctx(t), accounts[0].AccountKey))
		got, err := a.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute, ConnectorName: "crm"})
		require.NoError(t, err)
		require.Len(t, got, 1, "resumed: claimed at once")
	})
}

// TestFlowBadInput: every bad limit, pause or resume is ErrInvalidInput
// naming what is wrong, and changes nothing, on both databases.
func TestFlowBadInput(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		acct := repository.AccountKey{ConnectorName: "crm", AccountKey: "a"}
		cases := []struct {
			name, field string
			call        func() error
		}{
			{"zero rate period", "Rate", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Period: time.Second})
			}},
			{"negative rate", "Rate", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Rate: -1, Period: time.Second})
			}},
			{"zero period", "Period", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Rate: 5})
			}},
			{"negative cap", "MaxInFlight", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{MaxInFlight: -2})
			}},
			{"burst over rate", "Burst", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Rate: 2, Period: time.Second, Burst: 3})
			}},
			{"fair on an account", "Fair", func() error {
				return e.repo.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Fair: true})
			}},
			{"no connector", "connector", func() error {
				return e.repo.SetAccountLimits(ctx(t), repository.AccountKey{AccountKey: "a"}, repository.AccountLimits{MaxInFlight: 1})
			}},
			{"pause in the past", "until", func() error { return e.repo.PauseAccount(ctx(t), acct, e.clock.Now().Add(-time.Second)) }},
			{"resume unknown", "not paused", func() error { return e.repo.ResumeAccount(ctx(t), acct) }},
			{"list without limit", "limit", func() error {
				_, err := e.repo.ListAccounts(ctx(t), repository.ListAccountsParams{})
				return err
			}},
			{"negative weight", "weight", func() error {
				in := opInput("c", "neg")
				in.Weight = -1
				_, _, err := e.repo.RecordOperation(ctx(t), in)
				return err
			}},
			{"a weight over the most in a batch of good ones", "weight", func() error {
				ins := manyInputs("wb", 50)
				ins[31].Weight = repository.MaxWeight + 1
				_, err := e.repo.RecordOperations(ctx(t), ins)
				return err
			}},
		}
		for _, tc := range cases {
			err := tc.call()
			require.ErrorIs(t, err, repository.ErrInvalidInput, tc.name)
			require.True(t, strings.Contains(err.Error(), tc.field), "%s: %v", tc.name, err)
		}
		require.Zero(t, count(t, e.db, &models.FlowAccount{}), "nothing written")
		require.Zero(t, count(t, e.db, &models.Operation{}), "no operation recorded")
	})
}

// TestFlowAdaptiveCap: an adaptive account's live cap starts at its
// ceiling, halves on a throttling answer (at most once a second: a burst
// of 429s is one signal), never below 1, and grows by one after GrowAfter
// successes, up to the ceiling; ListAccounts shows it, and a claim obeys it.
func TestFlowAdaptiveCap(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := ctx(t)
		acct := repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"}
		require.NoError(t, e.repo.SetAccountLimits(c, acct, repository.AccountLimits{MaxInFlight: 8, Adaptive: true, GrowAfter: 2}))
		for i := range 40 {
			recordOp(t, e, "caller", "op"+strings.Repeat("x", i%3)+string(rune('a'+i)))
		}
		liveCap := func() int64 {
			t.Helper()
			got, err := e.repo.ListAccounts(c, repository.ListAccountsParams{Limit: 10})
			require.NoError(t, err)
			require.Len(t, got, 1)
			return got[0].LiveCap
		}
		claim := func(n int) []models.Operation {
			t.Helper()
			ops, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: n, LeaseFor: time.Minute})
			require.NoError(t, err)
			return ops
		}
		status := int64(429)
		throttle := func(op *models.Operation) {
			t.Helper()
			_, err := e.repo.SnoozeOperation(c, repository.SnoozeParams{Fence: repository.FenceOf(op), Until: e.clock.Now().Add(time.Millisecond),
				PauseAccount: true, Kind: "rate_limited", HTTPStatus: &status})
			require.NoError(t, err)
		}
		commit := func(ops []models.Operation) {
			t.Helper()
			for i := range ops {
				_, err := e.repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&ops[i])})
				require.NoError(t, err)
			}
		}
		require.EqualValues(t, 8, liveCap())
		ops := claim(20)
		require.Len(t, ops, 8, "the live cap bounds the claim")
		throttle(&ops[0])
		require.EqualValues(t, 7, liveCap(), "a 429 with seven others in flight: lowered by one, not halved below them")
		commit(ops[1:4])
		require.EqualValues(t, 8, liveCap(), "two successes grow it by one (the third counts toward the next)")
		throttle(&ops[4])
		require.EqualValues(t, 4, liveCap(), "three others in flight: halved")
		throttle(&ops[5])
		require.EqualValues(t, 2, liveCap(), "two others: halved")
		throttle(&ops[6])
		require.EqualValues(t, 1, liveCap(), "one other: lowered by one")
		throttle(&ops[7])
		require.EqualValues(t, 1, liveCap(), "never below 1")
		e.clock.Advance(2 * time.Second)
		more := claim(20)
		require.Len(t, more, 1, "the claim obeys the live cap")
		require.Empty(t, claim(1), "at the live cap: one lease live")
		commit(more)
		e.clock.Advance(2 * time.Second)
		for range 18 { // more successes than reach the ceiling
			got := claim(1)
			require.Len(t, got, 1)
			commit(got)
		}
		require.EqualValues(t, 8, liveCap(), "never above the ceiling")
	})
}
