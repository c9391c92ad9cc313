package integrationtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// TestFlowOrderedDocuments: a connector set Ordered; 8 goroutines record
// 1,000 updates of 50 documents (any goroutine any document, so records of
// one document race each other) while two pools of two instances claim
// them, and the fake provider sees every document's updates one at a time
// and in record order (seq), even though a tenth of the calls fail once
// and wait out a backoff. Operations without a document are not held.
func TestFlowOrderedDocuments(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		a, b := realRepo(t, e), secondRepo(t, e)
		require.NoError(t, a.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, repository.AccountLimits{Ordered: true}))

		const updates, docs, recorders = 1000, 50, 8
		var mu sync.Mutex
		seen := map[string][]int64{} // per document, the seqs the provider saw, in order
		inFlight := map[string]int{}
		var overlap, unordered, done atomic.Int64
		failed := sync.Map{}
		handler := func(_ context.Context, op *models.Operation) worker.Result {
			if op.DocumentID == nil {
				unordered.Add(1)
				return worker.Commit(nil, nil, nil)
			}
			doc := *op.DocumentID
			mu.Lock()
			inFlight[doc]++
			if inFlight[doc] > 1 {
				overlap.Add(1)
			}
			mu.Unlock()
			time.Sleep(time.Duration(op.Seq%3) * time.Millisecond)
			mu.Lock()
			inFlight[doc]--
			mu.Unlock()
			if op.Seq%10 == 3 {
				if _, again := failed.LoadOrStore(op.OperationID, true); !again {
					return worker.RetryAt("server_error", nil, time.Now().Add(20*time.Millisecond))
				}
			}
			mu.Lock()
			seen[doc] = append(seen[doc], op.Seq)
			mu.Unlock()
			done.Add(1)
			return worker.Commit(op.DocumentID, nil, nil)
		}
		var pools []*worker.Pool
		for _, r := range []*repository.Repository{a, b} {
			p, err := worker.New(r, worker.Config{Concurrency: 8, BatchSize: 8, Handler: handler,
				PollInterval: 20 * time.Millisecond})
			require.NoError(t, err)
			pools = append(pools, p)
		}
		c, cancel := context.WithCancel(context.Background())
		defer cancel()
		var running sync.WaitGroup
		for _, p := range pools {
			running.Go(func() { require.NoError(t, p.Run(c)) })
		}

		var recording sync.WaitGroup
		for g := range recorders {
			recording.Go(func() {
				for i := g; i < updates; i += recorders {
					doc := fmt.Sprintf("doc-%02d", (i*7)%docs)
					in := opInput("did:key:caller", fmt.Sprintf("u-%04d", i))
					in.DocumentID = &doc
					_, _, err := a.RecordOperation(ctx(t), in)
					require.NoError(t, err)
				}
			})
		}
		recording.Wait()
		for i := range 20 {
			_, _, err := b.RecordOperation(ctx(t), opInput("did:key:caller", fmt.Sprintf("free-%02d", i)))
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return done.Load() == updates && unordered.Load() == 20 },
			60*time.Second, 10*time.Millisecond, "every update reaches the provider")
		cancel()
		running.Wait()

		require.Zero(t, overlap.Load(), "two updates of one document in flight at once")
		var total int
		for doc, seqs := range seen {
			total += len(seqs)
			for i := 1; i < len(seqs); i++ {
				require.Less(t, seqs[i-1], seqs[i], "document %s reached the provider out of record order: %v", doc, seqs)
			}
		}
		require.Equal(t, updates, total)
		require.Len(t, seen, docs)
	})
}

// TestFlowOrderedRecordsCommitInSeqOrder (PostgreSQL, where writers run at
// once): a document's update recorded while an earlier one's transaction
// is still open waits for it, so it cannot commit first and be claimed
// ahead of it; once the first commits, a claim leases the first alone.
func TestFlowOrderedRecordsCommitInSeqOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	repo := realRepo(t, e)
	require.NoError(t, repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, repository.AccountLimits{Ordered: true}))
	// The account's row exists and waits for no work, so a record does not
	// touch it: nothing but the document's lock orders the two records.
	require.NoError(t, repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"}, repository.AccountLimits{}))
	doc := "doc-1"
	first, second := opInput("did:key:caller", "first"), opInput("did:key:caller", "second")
	first.DocumentID, second.DocumentID = &doc, &doc

	tx := e.db.Begin()
	require.NoError(t, tx.Error)
	defer tx.Rollback()
	_, _, err := repo.WithTx(tx).RecordOperation(ctx(t), first)
	require.NoError(t, err)
	recorded := make(chan error, 1)
	go func() {
		_, _, err := repo.RecordOperation(ctx(t), second)
		recorded <- err
	}()
	select {
	case err := <-recorded:
		t.Fatalf("the later update committed while the earlier one's transaction was open (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	got, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Empty(t, got, "nothing of the document is committed yet")
	require.NoError(t, tx.Commit().Error)
	require.NoError(t, <-recorded)
	got, err = repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "first", got[0].OperationID, "the earlier update first, alone")
}

// TestFlowOrderedBatchesDoNotDeadlock (PostgreSQL): two instances record
// batches of the same 200 documents in opposite orders at once, twenty times:
// each batch takes its documents' locks in one order, so none waits for
// the other and every batch lands.
func TestFlowOrderedBatchesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	a, b := realRepo(t, e), secondRepo(t, e)
	require.NoError(t, a.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"}, repository.AccountLimits{Ordered: true}))
	for round := range 20 {
		batch := func(prefix string, reverse bool) []repository.OperationInput {
			var ins []repository.OperationInput
			for d := range 200 {
				if reverse {
					d = 199 - d
				}
				doc := fmt.Sprintf("doc-%03d", d)
				in := opInput("did:key:caller", fmt.Sprintf("%s-%02d-%03d", prefix, round, d))
				in.DocumentID = &doc
				ins = append(ins, in)
			}
			return ins
		}
		var wg sync.WaitGroup
		for i, r := range []*repository.Repository{a, b} {
			wg.Go(func() {
				out, err := r.RecordOperations(ctx(t), batch(fmt.Sprint("i", i), i == 1))
				require.NoError(t, err)
				for _, o := range out {
					require.NoError(t, o.Err)
					require.True(t, o.Created)
				}
			})
		}
		wg.Wait()
	}
}
