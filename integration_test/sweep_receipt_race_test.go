package integrationtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestRecordReceiptManyRecorders: many recorders each writing many complete
// receipts into several partitions, round after round: every call succeeds
// and each partition's sequences are exactly 1..N.
func TestRecordReceiptManyRecorders(t *testing.T) {
	t.Parallel()
	const rounds, recorders, perRecorder, partitions = 4, 4, 50, 2
	forEachDB(t, func(t *testing.T, e *env) {
		for round := range rounds {
			var wg sync.WaitGroup
			errs := make([]error, recorders*perRecorder)
			for i := range recorders {
				wg.Go(func() {
					for j := range perRecorder {
						rec := receipt(fmt.Sprintf("r%d-%d", i, j))
						rec.OwnerDID = fmt.Sprintf("round-%d", round)
						rec.Partition = fmt.Sprintf("part-%d", (i+j)%partitions)
						_, errs[i*perRecorder+j] = e.repo.RecordRelistReceipt(context.Background(), rec, cands("a"))
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err, "round %d", round)
			}
			for p := range partitions {
				var seqs []int64
				require.NoError(t, e.db.Model(&models.SweepReceipt{}).
					Where(`owner_did = ? AND "partition" = ?`, fmt.Sprintf("round-%d", round), fmt.Sprintf("part-%d", p)).
					Order("sequence").Pluck("sequence", &seqs).Error)
				want := make([]int64, recorders*perRecorder/partitions)
				for k := range want {
					want[k] = int64(k + 1)
				}
				require.Equal(t, want, seqs, "round %d partition %d: consecutive, no gaps", round, p)
			}
		}
	})
}

// TestReceiptReplayWaitsForCommit: a replay of a receipt whose commit is in
// flight waits for it, then sees it committed and adds nothing, instead of
// inserting pending candidates under a committed receipt.
func TestReceiptReplayWaitsForCommit(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	recordReceipt(t, e, "p1", "a")
	setState(t, e, "p1", "a", models.CandidateApplied)
	holder, pid := lockHolder(t, e.db)
	_, err := e.repo.WithTx(holder).CommitSweepCheckpoint(ctx(t), receiptKey("p1"))
	require.NoError(t, err, "the commit runs, uncommitted, in the holder's transaction")

	type result struct {
		recorded bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := e.repo.RecordRelistReceipt(context.Background(), receipt("p1"), cands("late"))
		done <- result{ok, err}
	}()
	blocked := func() bool {
		var n int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))`, pid).
			Scan(&n).Error)
		return n > 0
	}
	require.Eventually(t, func() bool { return blocked() || len(done) > 0 }, 20*time.Second, 5*time.Millisecond)
	require.True(t, blocked(), "the replay must wait on the commit's lock on the receipt row")
	require.NoError(t, holder.Commit().Error)

	res := <-done
	require.NoError(t, res.err)
	require.False(t, res.recorded, "the replay finds the receipt committed")
	require.Zero(t, count(t, e.db, &models.SweepCandidate{}, "document_id = ?", "late"))
}
