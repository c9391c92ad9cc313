package integrationtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func TestRecordRelistReceipt(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		partial := receipt("p0")
		partial.Complete = false
		ok, err := e.repo.RecordRelistReceipt(ctx(t), partial, cands("a"))
		require.NoError(t, err)
		require.False(t, ok, "an incomplete relist is never recorded")
		require.Empty(t, sweepSnapshot(t, e).Receipts)

		recordReceipt(t, e, "p1", "a", "b")
		e.clock.Advance(time.Second)
		recordReceipt(t, e, "p2", "a")
		other := receipt("p1")
		other.Partition = "deals"
		_, err = e.repo.RecordRelistReceipt(ctx(t), other, nil)
		require.NoError(t, err)

		s := sweepSnapshot(t, e)
		seqs := map[string]int64{}
		for _, r := range s.Receipts {
			seqs[r.Partition+"/"+r.Provenance] = r.Sequence
			require.Equal(t, int64(1), r.Complete)
			require.Nil(t, r.CommittedAt)
		}
		require.Equal(t, map[string]int64{"contacts/p1": 1, "contacts/p2": 2, "deals/p1": 1}, seqs)
		require.JSONEq(t, `{"list":"all"}`, s.Receipts[0].Scope.String())
		require.Len(t, s.Candidates, 3)
		c := candidate(t, e, "p1", "a")
		require.Equal(t, models.CandidatePending, c.State)
		require.Equal(t, int64(0), c.NextAttemptAt)
		require.Equal(t, "src-a", *c.SourceID)

		// Re-recording an uncommitted receipt keeps its sequence and existing
		// candidates' progress, and adds the new ones.
		setState(t, e, "p1", "a", models.CandidatePresent)
		recordReceipt(t, e, "p1", "a", "c")
		require.Equal(t, models.CandidatePresent, candidate(t, e, "p1", "a").State)
		require.Equal(t, models.CandidatePending, candidate(t, e, "p1", "c").State)
		require.Equal(t, seqs["contacts/p1"], sweepSnapshot(t, e).Receipts[0].Sequence)

		listed, err := e.repo.ListSweepReceipts(ctx(t), repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Len(t, listed, 3)
		require.Equal(t, "p2", listed[2].Provenance, "oldest created first")
	})
}

func TestRecordReceiptSkipsCommitted(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1")
		_, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("p1"))
		require.NoError(t, err)
		before := sweepSnapshot(t, e)
		ok, err := e.repo.RecordRelistReceipt(ctx(t), receipt("p1"), cands("x", "y"))
		require.NoError(t, err)
		require.False(t, ok, "a replay of a committed receipt has nothing left to verify")
		require.Equal(t, before, sweepSnapshot(t, e))
		listed, err := e.repo.ListSweepReceipts(ctx(t), repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Empty(t, listed)
	})
}

func TestRecordReceiptConcurrentSequences(t *testing.T) {
	t.Parallel()
	const recorders = 8
	forEachDB(t, func(t *testing.T, e *env) {
		var wg sync.WaitGroup
		errs := make([]error, recorders)
		for i := range recorders {
			wg.Go(func() {
				_, errs[i] = e.repo.RecordRelistReceipt(context.Background(), receipt(fmt.Sprintf("p%d", i)), cands("a", "b"))
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		var seqs []int
		for _, r := range sweepSnapshot(t, e).Receipts {
			seqs = append(seqs, int(r.Sequence))
		}
		sort.Ints(seqs)
		require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, seqs)
	})
}

// TestRecordReceiptBatchesCandidates: 2,500 candidates are 3 INSERTs.
func TestRecordReceiptBatchesCandidates(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, rec := recordingRepo(t, e)
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(2500))
		require.NoError(t, err)
		require.True(t, ok)
		inserts := 0
		for _, stmt := range rec.take() {
			if strings.HasPrefix(stmt, "INSERT") && strings.Contains(stmt, "kubun_connector_sweep_candidate") {
				inserts++
			}
		}
		require.Equal(t, 3, inserts)
		require.Equal(t, int64(2500), count(t, e.db, &models.SweepCandidate{}))
	})
}

func TestSweepBadInput(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a")
		before := sweepSnapshot(t, e)
		badJSON, noModel := receipt("p2"), receipt("p3")
		badJSON.Predicate = models.JSON(`{`)
		noModel.ModelID = ""
		cases := map[string]func() error{
			"receipt empty partition": func() error {
				r := receipt("p2")
				r.Partition = ""
				_, err := e.repo.RecordRelistReceipt(ctx(t), r, nil)
				return err
			},
			"receipt malformed JSON": func() error { _, err := e.repo.RecordRelistReceipt(ctx(t), badJSON, nil); return err },
			"receipt no model":       func() error { _, err := e.repo.RecordRelistReceipt(ctx(t), noModel, nil); return err },
			"candidate no document": func() error {
				_, err := e.repo.RecordRelistReceipt(ctx(t), receipt("p2"), []repository.CandidateInput{{ModelID: "m"}})
				return err
			},
			"outcome unknown": func() error {
				_, err := e.repo.RecordSweepOutcome(ctx(t), repository.SweepOutcome{CandidateKey: candKey("p1", "a"), Outcome: "applied"})
				return err
			},
			"outcome negative time": func() error {
				_, err := e.repo.RecordSweepOutcome(ctx(t), repository.SweepOutcome{CandidateKey: candKey("p1", "a"),
					Outcome: models.CandidatePresent, NextAttemptAt: time.UnixMilli(-1)})
				return err
			},
			"failure empty error": func() error {
				_, err := e.repo.RecordSweepApplyFailure(ctx(t), repository.ApplyFailure{CandidateKey: candKey("p1", "a")})
				return err
			},
			"applied empty document":  func() error { _, err := e.repo.MarkSweepCandidateApplied(ctx(t), candKey("p1", "")); return err },
			"commit empty provenance": func() error { _, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("")); return err },
			"list zero limit": func() error {
				_, err := e.repo.ListSweepCandidates(ctx(t), repository.ListCandidatesParams{OwnerDID: "owner", ConnectorName: "crm"})
				return err
			},
			"checkpoint empty owner": func() error {
				_, err := e.repo.GetSweepCheckpoint(ctx(t), repository.PartitionKey{ConnectorName: "crm", Partition: "x"})
				return err
			},
		}
		for name, call := range cases {
			require.ErrorIs(t, call(), repository.ErrInvalidInput, name)
		}
		require.Equal(t, before, sweepSnapshot(t, e))
	})
}
