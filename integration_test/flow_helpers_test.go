package integrationtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// secondRepo is a repository with the real clock on a second handle (its
// own pool of connections) to e's database: another application instance.
func secondRepo(t *testing.T, e *env) *repository.Repository {
	t.Helper()
	db := openDSN(t, e.kind, e.dsn)
	repo, err := dbtest.Install(context.Background(), db, nil, repository.Options{})
	require.NoError(t, err)
	return repo
}

// seedAccount records n operations of account acct (connector crm) due now
// by the real clock, with ids prefix-000000…, created one millisecond
// apart from base.
func seedAccount(t *testing.T, e *env, acct, prefix string, n int, base int64) {
	t.Helper()
	rows := make([]models.Operation, n)
	for i := range rows {
		created := base + int64(i)
		rows[i] = dbtest.OpRow(i, models.OperationAttempted, nil, created)
		rows[i].OperationID = fmt.Sprintf("%s-%06d", prefix, i)
		rows[i].DeterministicEventID = "e" + rows[i].OperationID
		rows[i].AccountKey = acct
	}
	require.NoError(t, e.db.CreateInBatches(rows, 1000).Error)
}

// starts records when each handler started, per account.
type starts struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func newStarts() *starts { return &starts{at: map[string][]time.Time{}} }

func (s *starts) start(acct string) {
	s.mu.Lock()
	s.at[acct] = append(s.at[acct], time.Now())
	s.mu.Unlock()
}

// runPools runs pools until d passes or ctx ends, and returns when all
// have returned.
func runPools(t *testing.T, d time.Duration, pools ...*worker.Pool) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(func() { require.NoError(t, p.Run(c)) })
	}
	wg.Wait()
}

// flowLeaseFor is the lease of the flow tests' pools: a handler reads its
// claim's now (by the application's lease clock) as its lease's expiry
// less this.
const flowLeaseFor = 30 * time.Second

// inWindow is how many of the sorted times (ms) fall in [at[i], at[i]+w).
func inWindow(at []int64, i int, w int64) int {
	j := i
	for j < len(at) && at[j]-at[i] < w {
		j++
	}
	return j - i
}

// lateness is the most that the k-th earliest start (ms) came after the
// k-th earliest lease: how late the pool started what it was leased.
func lateness(t *testing.T, starts, leased []int64) time.Duration {
	t.Helper()
	require.Len(t, starts, len(leased))
	s := slices.Clone(starts)
	slices.Sort(s)
	var late int64
	for k := range s {
		late = max(late, s[k]-leased[k])
	}
	return time.Duration(late) * time.Millisecond
}
