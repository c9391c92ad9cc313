package integrationtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// BenchmarkBatchCommitLiveLeases: a 16-row CommitOperations with no other
// live lease and with 8,000 others (a busy pool's journal). The two figures
// should be close: the commit finds its rows by key, whatever else is
// leased (see BENCHMARKS.md).
func BenchmarkBatchCommitLiveLeases(b *testing.B) {
	for _, kind := range []string{pgKind, sqlitekind} {
		for _, live := range []int{0, 8000} {
			b.Run(fmt.Sprintf("%s/live=%d", kind, live), func(b *testing.B) {
				e := setup(b, kind)
				now := e.clock.Millis()
				far := now + time.Hour.Milliseconds()
				others := make([]models.Operation, live)
				for i := range others {
					others[i] = dbtest.OpRow(i, models.OperationAttempted, &far, now)
					tok := fmt.Sprintf("tok%d", i)
					others[i].LeaseToken, others[i].LeaseExpiresAt = &tok, &far
				}
				if live > 0 {
					require.NoError(b, e.db.CreateInBatches(others, 500).Error)
				}
				n := 0
				for b.Loop() {
					b.StopTimer()
					owner := fmt.Sprintf("b%d", n)
					n++
					ins := make([]repository.OperationInput, 16)
					for i := range ins {
						ins[i] = opInput("caller", fmt.Sprintf("%s-%d", owner, i))
						ins[i].OwnerDID = owner
					}
					_, err := e.repo.RecordOperations(b.Context(), ins)
					require.NoError(b, err)
					ops, err := e.repo.ClaimOperations(b.Context(), repository.ClaimParams{Limit: 16, LeaseFor: time.Hour, OwnerDID: owner})
					require.NoError(b, err)
					commits := make([]repository.CommitParams, len(ops))
					for i := range ops {
						commits[i] = repository.CommitParams{Fence: repository.FenceOf(&ops[i])}
					}
					b.StartTimer()
					out, err := e.repo.CommitOperations(b.Context(), commits)
					require.NoError(b, err)
					require.NoError(b, out[0].Err)
				}
			})
		}
	}
}
