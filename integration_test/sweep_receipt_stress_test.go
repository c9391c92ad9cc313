package integrationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestReceiptRecordersAmongLockSkippingWriters: recorders of ten receipts
// while lock-skipping writers keep inserting candidates of the same keys
// (ON CONFLICT DO NOTHING, their own values): every call succeeds, every
// key ends with each document once, the writers' rows as they wrote them.
func TestReceiptRecordersAmongLockSkippingWriters(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		obs := &recordingObserver{}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Observer: obs})
		require.NoError(t, err)
		var stop atomic.Bool
		var writers sync.WaitGroup
		var written atomic.Int64
		for w := range 2 {
			writers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 9))
				for !stop.Load() {
					err := e.db.Exec(`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name, "partition",
						provenance, document_id, source_id, model_id, state, attempts, apply_failures, updated_at, next_attempt_at)
						VALUES (?, ?, ?, ?, ?, 'writer', 'w', 'present', 0, 0, 1, 0) ON CONFLICT DO NOTHING`,
						partition.OwnerDID, partition.ConnectorName, partition.Partition, fmt.Sprintf("p%d", r.IntN(10)),
						fmt.Sprintf("doc-%06d", r.IntN(1600))).Error
					if err != nil {
						t.Error(err)
						return
					}
					written.Add(1)
				}
			})
		}
		var rec sync.WaitGroup
		errs := make([]error, 10)
		for k := range 10 {
			rec.Go(func() {
				_, errs[k] = repo.RecordRelistReceipt(context.Background(), receipt(fmt.Sprintf("p%d", k)), manyCands(1500))
			})
		}
		rec.Wait()
		stop.Store(true)
		writers.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		retries := countEvents(obs.take(), repository.EventReceiptRetry)
		t.Logf("%d writer inserts, %d receipt retries", written.Load(), retries)
		for k := range 10 {
			var got []models.SweepCandidate
			require.NoError(t, e.db.Where("provenance = ?", fmt.Sprintf("p%d", k)).Find(&got).Error)
			seen := map[string]bool{}
			for _, c := range got {
				require.False(t, seen[c.DocumentID])
				seen[c.DocumentID] = true
			}
			for i := range 1500 {
				require.True(t, seen[fmt.Sprintf("doc-%06d", i)])
			}
		}
	})
}
