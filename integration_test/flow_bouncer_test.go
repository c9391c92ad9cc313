package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestFlowBehindPgBouncer: behind PgBouncer in transaction pooling, where
// a client's consecutive transactions run on different server
// connections, two instances with pools of their own serve an account
// capped at 2 and a connector set Ordered: the cap holds (the account's row
// lock is the claim transaction's), the operations of one document never
// overlap (the document lock is transaction-scoped too), and the work is
// done. Nothing of flow control needs a session of its own.
func TestFlowBehindPgBouncer(t *testing.T) {
	t.Parallel()
	dsn := withExecMode(t, bouncedDatabase(t, pgbouncerDSN(t)), "exec")
	var repos []*repository.Repository
	for range 2 {
		db := openDSN(t, pgKind, dsn)
		require.NoError(t, db.Use(hooks.New(hooks.Config{})))
		require.NoError(t, migrations.Migrate(context.Background(), db))
		r, err := repository.New(db, repository.Options{})
		require.NoError(t, err)
		repos = append(repos, r)
	}
	require.NoError(t, repos[0].SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, repository.AccountLimits{Ordered: true}))
	require.NoError(t, repos[0].SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"},
		repository.AccountLimits{MaxInFlight: 2}))
	const docs, each = 10, 6
	var recorded sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		recorded.Go(func() {
			for i := range docs * each / 2 {
				in := opInput("caller", fmt.Sprintf("b%d-%03d", w, i))
				doc := fmt.Sprintf("doc-%d", (i*2+w)%docs)
				in.DocumentID = &doc
				if _, _, err := repos[w].RecordOperation(ctx(t), in); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	recorded.Wait()
	require.NoError(t, errors.Join(errs...))

	var running, peak, done atomic.Int64
	var mu sync.Mutex
	inFlight := map[string]bool{}
	var overlap atomic.Int64
	handler := func(_ context.Context, op *models.Operation) worker.Result {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		if inFlight[*op.DocumentID] {
			overlap.Add(1)
		}
		inFlight[*op.DocumentID] = true
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		mu.Lock()
		delete(inFlight, *op.DocumentID)
		mu.Unlock()
		running.Add(-1)
		done.Add(1)
		return worker.Commit(nil, nil, nil)
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range repos {
		p, err := worker.New(r, worker.Config{Concurrency: 4, BatchSize: 4, LeaseFor: 30 * time.Second,
			PollInterval: 20 * time.Millisecond, Handler: handler})
		require.NoError(t, err)
		wg.Go(func() { require.NoError(t, p.Run(c)) })
	}
	for done.Load() < docs*each && c.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	require.Equal(t, int64(docs*each), done.Load(), "every operation done behind the pooler")
	require.LessOrEqual(t, peak.Load(), int64(2), "the cap holds")
	require.Equal(t, int64(2), peak.Load(), "served at its cap")
	require.Zero(t, overlap.Load(), "no two operations of one document at once")
}
