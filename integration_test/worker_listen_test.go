package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// pickupPool runs a pool on repo that polls every second and reports when
// each handler starts, until the test ends.
func pickupPool(t testing.TB, repo *repository.Repository, disableListen bool) (*worker.Pool, <-chan time.Time) {
	t.Helper()
	started := make(chan time.Time, 1024)
	pool, err := worker.New(repo, worker.Config{PollInterval: time.Second, DisableListen: disableListen,
		Handler: func(context.Context, *models.Operation) worker.Result {
			started <- time.Now()
			return worker.Commit(nil, nil, nil)
		}})
	require.NoError(t, err)
	c, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(c) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	return pool, started
}

// TestWorkerListenWakes (PostgreSQL): an operation recorded while the pool
// idles with a 1 s poll starts within 100 ms (the recording's NOTIFY wakes
// the pool), five times over; an operation recorded in a transaction that
// rolls back wakes nobody. Not parallel: its timing must not share the
// machine with the parallel tests. Run on plain and on hash-partitioned
// tables (the statement trigger is the partitioned parent's).
func TestWorkerListenWakes(t *testing.T) {
	t.Run(pgKind, func(t *testing.T) { listenWakes(t, setup(t, pgKind)) })
	t.Run(partitionedLeg, func(t *testing.T) { listenWakes(t, setupPartitioned(t)) })
}

func listenWakes(t *testing.T, e *env) {
	repo := realRepo(t, e)
	pool, started := pickupPool(t, repo, false)
	time.Sleep(300 * time.Millisecond) // the first claim found nothing: the pool idles

	for i := range 5 {
		in := opInput("caller", "wake-"+string(rune('a'+i)))
		_, _, err := repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
		recorded := time.Now()
		select {
		case at := <-started:
			require.Less(t, at.Sub(recorded), 100*time.Millisecond, "picked up without waiting for the poll")
		case <-time.After(5 * time.Second):
			t.Fatal("the recorded operation never started")
		}
		time.Sleep(50 * time.Millisecond) // idle again
	}
	require.GreaterOrEqual(t, pool.Stats().Wakeups, int64(5))

	wakeups := pool.Stats().Wakeups
	rollback := errors.New("roll back")
	err := repo.Transaction(ctx(t), func(_ *gorm.DB, tx *repository.Repository) error {
		_, _, err := tx.RecordOperation(ctx(t), opInput("caller", "rolled-back"))
		require.NoError(t, err)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, wakeups, pool.Stats().Wakeups, "a rolled-back recording wakes nobody")
	require.Empty(t, started)

	// Another schema's recordings on the same database do not wake it.
	other := setup(t, pgKind)
	_, _, err = other.repo.RecordOperation(ctx(t), opInput("caller", "elsewhere"))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, wakeups, pool.Stats().Wakeups, "only this schema's table announces to this pool")
}

// BenchmarkPickupLatency (PostgreSQL): from RecordOperation's return to the
// handler's start, with PollInterval 1 s, woken by NOTIFY and polling only.
// Reports p50 and p99 in milliseconds.
func BenchmarkPickupLatency(b *testing.B) {
	for _, mode := range []struct {
		name          string
		disableListen bool
	}{{"listen", false}, {"poll-only", true}} {
		b.Run(mode.name, func(b *testing.B) {
			e := setup(b, pgKind)
			repo, err := repository.New(e.db, repository.Options{})
			require.NoError(b, err)
			_, started := pickupPool(b, repo, mode.disableListen)
			time.Sleep(300 * time.Millisecond)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				_, _, err := repo.RecordOperation(context.Background(), opInput("caller", fmt.Sprintf("p-%d-%s", i, dbtest.RandomHex(4))))
				require.NoError(b, err)
				recorded := time.Now()
				lat = append(lat, (<-started).Sub(recorded))
				time.Sleep(time.Duration(i%7) * 10 * time.Millisecond) // arrive at varied points of the poll
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
