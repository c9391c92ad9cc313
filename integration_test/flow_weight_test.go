package integrationtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestFlowWeightedRate: operations recorded with weights 1, 2 and 5 under
// a rate of 20 units a second with a burst of 10, claimed by pools on two
// instances for 4 s: no second of claims spends more than 30 units (the
// burst and a second's rate), the units spent in the long run are the
// rate's, and an operation heavier than the burst (weight 15) is not
// wedged: it starts, alone on a full limiter, and the units after it wait
// out its overdraft.
func TestFlowWeightedRate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		a, b := realRepo(t, e), secondRepo(t, e)
		acct := repository.AccountKey{ConnectorName: "crm", AccountKey: "points"}
		require.NoError(t, a.SetAccountLimits(ctx(t), acct, repository.AccountLimits{Rate: 20, Period: time.Second, Burst: 10}))
		weights := []int64{1, 2, 5}
		ins := make([]repository.OperationInput, 600)
		for i := range ins {
			ins[i] = opInput("caller", fmt.Sprintf("w%04d", i))
			ins[i].AccountKey = "points"
			ins[i].Weight = weights[i%len(weights)]
		}
		ins[9].Weight = 15 // heavier than the burst
		_, err := a.RecordOperations(ctx(t), ins)
		require.NoError(t, err)

		type lease struct{ at, weight int64 }
		var mu sync.Mutex
		var leases []lease
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			mu.Lock()
			leases = append(leases, lease{*op.LeaseExpiresAt - flowLeaseFor.Milliseconds(), op.Weight})
			mu.Unlock()
			return worker.Commit(nil, nil, nil)
		}
		var pools []*worker.Pool
		for _, repo := range []*repository.Repository{a, b} {
			p, err := worker.New(repo, worker.Config{Concurrency: 8, BatchSize: 8, LeaseFor: flowLeaseFor,
				PollInterval: 50 * time.Millisecond, Handler: handler})
			require.NoError(t, err)
			pools = append(pools, p)
		}
		runPools(t, 4*time.Second, pools...)

		slices.SortFunc(leases, func(x, y lease) int { return int(x.at - y.at) })
		heavy := false
		var units int64
		for i, l := range leases {
			units += l.weight
			heavy = heavy || l.weight == 15
			var window int64
			bound := int64(30) // the burst and a second's rate
			for j := i; j < len(leases) && leases[j].at-l.at < 1000; j++ {
				window += leases[j].weight
				if leases[j].weight == 15 {
					bound = 35 // a full limiter overdrawn by the heavy one's excess
				}
			}
			require.LessOrEqual(t, window, bound, "units leased in the second from %d ms", l.at-leases[0].at)
		}
		require.True(t, heavy, "the operation heavier than the burst started")
		elapsed := float64(leases[len(leases)-1].at-leases[0].at) / 1000
		rate := float64(units-10) / elapsed // the burst aside
		t.Logf("%d operations, %d units in %.2f s: %.1f units a second", len(leases), units, elapsed, rate)
		require.InDelta(t, 20, rate, 3, "units, not operations, are what the rate counts")
		var stored models.Operation
		require.NoError(t, e.db.Where("operation_id = ?", "w0001").Take(&stored).Error)
		require.Equal(t, int64(2), stored.Weight, "the recorded weight is stored")
	})
}

// TestFlowReleaseRefundsItsWeight: with the clock standing still, an
// account and its connector each with a rate of 2 a second and a burst of
// 2, a claim leases an operation of weight 2 and nothing more; released
// unstarted, its weight goes back to both rates, so the next claim leases
// it again at once; started and finished, it does not.
func TestFlowReleaseRefundsItsWeight(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		rate := repository.AccountLimits{Rate: 2, Period: time.Second, Burst: 2}
		require.NoError(t, e.repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, rate))
		require.NoError(t, e.repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"}, rate))
		heavy := opInput("caller", "heavy")
		heavy.Weight = 2
		_, _, err := e.repo.RecordOperation(ctx(t), heavy)
		require.NoError(t, err)
		e.clock.Advance(time.Millisecond)
		recordOp(t, e, "caller", "light")
		claim := func() []models.Operation {
			ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
			require.NoError(t, err)
			return ops
		}
		got := claim()
		require.Len(t, got, 1, "weight 2 spends the burst of 2")
		require.Equal(t, "heavy", got[0].OperationID)
		require.Empty(t, claim(), "nothing left of either rate")
		out, err := e.repo.ReleaseOperations(ctx(t), []repository.Fence{repository.FenceOf(&got[0])})
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		again := claim()
		require.Len(t, again, 1, "released unstarted: its weight is back in both rates")
		require.Equal(t, "heavy", again[0].OperationID)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&again[0]), DocumentID: models.StrPtr("doc-h")})
		require.NoError(t, err)
		require.Empty(t, claim(), "a finished operation's weight stays spent")
	})
}

// TestFlowHeavyOpNotStarvedBySibling: under a connector rate of 10 a
// second with a burst of 5, one account's operation of weight 4 beside a
// sibling's backlog of 2,000 (weight 1) runs within its wait for room,
// not never: the connector's rate is held for it (the hold on the
// connector's row) while the sibling waits.
func TestFlowHeavyOpNotStarvedBySibling(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo := realRepo(t, e)
		require.NoError(t, repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"},
			repository.AccountLimits{Rate: 10, Period: time.Second, Burst: 5}))
		require.NoError(t, repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm", AccountKey: "busy"},
			repository.AccountLimits{MaxInFlight: 100}))
		seedAccount(t, e, "busy", "b", 2000, time.Now().Add(-time.Minute).UnixMilli())
		heavy := opInput("caller", "heavy")
		heavy.Weight = 4
		_, _, err := repo.RecordOperation(ctx(t), heavy)
		require.NoError(t, err)
		var mu sync.Mutex
		var heavyAt time.Time
		began := time.Now()
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			if op.OperationID == "heavy" {
				mu.Lock()
				heavyAt = time.Now()
				mu.Unlock()
			}
			return worker.Commit(nil, nil, nil)
		}
		p, err := worker.New(repo, worker.Config{Concurrency: 8, BatchSize: 8, LeaseFor: flowLeaseFor,
			PollInterval: 20 * time.Millisecond, Handler: handler})
		require.NoError(t, err)
		runPools(t, 4*time.Second, p)
		mu.Lock()
		defer mu.Unlock()
		require.False(t, heavyAt.IsZero(), "the weight-4 operation ran beside the sibling's backlog")
		t.Logf("the weight-4 operation started %v after the pool", heavyAt.Sub(began))
	})
}
