package integrationtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// candidateInserts is the candidate INSERTs rec recorded since it was last
// taken, and how many of them leave existing rows as they are.
func candidateInserts(rec *sqlRecorder) (inserts, keeping int) {
	for _, s := range rec.take() {
		if strings.HasPrefix(s, "INSERT INTO kubun_connector_sweep_candidate") {
			inserts++
			if strings.Contains(s, "ON CONFLICT DO NOTHING") {
				keeping++
			}
		}
	}
	return inserts, keeping
}

// TestRecordReceiptKeepsFirstOccurrence: a relist that names documents out
// of order and some twice, a repeat in another batch than its first
// occurrence, stores each document once, as its first occurrence gave it
// (the seed inserts candidate by candidate, ON CONFLICT DO NOTHING). On a
// new relist that is three plain INSERTs and nothing else: a repeat left in
// a plain INSERT would fail it and retry the transaction (more INSERTs), and
// a kept last occurrence would show in the source ids.
func TestRecordReceiptKeepsFirstOccurrence(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, rec := recordingRepo(t, e)
		var in []repository.CandidateInput
		for i := 2499; i >= 0; i-- { // descending: nothing is in order
			in = append(in, repository.CandidateInput{DocumentID: fmt.Sprintf("doc-%06d", i),
				SourceID: models.StrPtr("first"), ModelID: "contact"})
		}
		for _, i := range []int{0, 1, 1500, 2499} { // repeats, 1,000+ rows after their first occurrence
			in = append(in, repository.CandidateInput{DocumentID: fmt.Sprintf("doc-%06d", i),
				SourceID: models.StrPtr("repeat"), ModelID: "other"})
		}
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), in)
		require.NoError(t, err)
		require.True(t, ok)
		inserts, keeping := candidateInserts(rec)
		require.Equal(t, 3, inserts, "one INSERT per 1,000 documents, no retry")
		require.Zero(t, keeping, "a new relist inserts plainly")
		var got []models.SweepCandidate
		require.NoError(t, e.db.Order("document_id").Find(&got).Error)
		require.Len(t, got, 2500)
		for _, c := range got {
			require.Equal(t, "first", *c.SourceID, c.DocumentID)
			require.Equal(t, "contact", c.ModelID, c.DocumentID)
		}
		require.Equal(t, "doc-000000", got[0].DocumentID)
		require.Equal(t, "doc-002499", got[2499].DocumentID)
	})
}

// TestRecordReceiptLeavesExistingCandidates: where the receipt's key has
// candidates already (a replay of an uncommitted receipt, or rows another
// writer left without a receipt), every INSERT leaves them as they are,
// from a scoped caller as from an unscoped one.
func TestRecordReceiptLeavesExistingCandidates(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		// An orphan: a candidate of p1 with no receipt, progressed.
		require.NoError(t, e.db.Create(&models.SweepCandidate{OwnerDID: partition.OwnerDID,
			ConnectorName: partition.ConnectorName, Partition: partition.Partition, Provenance: "p1",
			DocumentID: "doc-001200", SourceID: models.StrPtr("orphan"), ModelID: "contact",
			State: models.CandidateApplied, UpdatedAt: 1}).Error)
		rec := newSQLRecorder()
		repo, err := repository.New(e.db.Session(&gorm.Session{Logger: rec}),
			repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		scoped, err := repo.WithScopes(ctx(t), scopes.Owner(partition.OwnerDID))
		require.NoError(t, err)
		rec.take() // the scope's check
		for _, r := range []*repository.Repository{scoped, repo} {
			ok, err := r.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(2500))
			require.NoError(t, err)
			require.True(t, ok)
			inserts, keeping := candidateInserts(rec)
			require.Equal(t, 3, inserts, "no retry")
			require.Equal(t, 3, keeping, "the key had rows: every INSERT keeps them")
			c := candidate(t, e, "p1", "doc-001200")
			require.Equal(t, models.CandidateApplied, c.State)
			require.Equal(t, "orphan", *c.SourceID)
			require.Equal(t, int64(2500), count(t, e.db, &models.SweepCandidate{}))
		}
	})
}

// TestRecordReceiptRacingWriterWithoutLock: a writer that takes no
// partition lock commits a candidate of the receipt's key after the
// recorder's probe found none and before its plain INSERT. The INSERT
// fails on the key and is rolled back to its savepoint; the general path
// (input order, ON CONFLICT DO NOTHING) then keeps the racer's row as it
// is: the relist lands once, in one transaction, every document stored
// once, the racer's candidate untouched; the observer sees one
// receipt_fallback event.
func TestRecordReceiptRacingWriterWithoutLock(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		obs := &recordingObserver{}
		db, repo := instance(t, e, repository.Options{Observer: obs})
		armed, plain, keeping := armRacer(t, e, db, "test:racing_candidate")
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(1500))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 1, countEvents(obs.take(), repository.EventReceiptFallback), "the fallback is reported once")
		require.False(t, armed.Load(), "the racer ran")
		require.Equal(t, int32(1), plain.Load(), "one plain INSERT, which failed")
		require.Equal(t, int32(2), keeping.Load(), "the general path keeps what exists")
		requireRacedResult(t, e)
		s := sweepSnapshot(t, e)
		require.Equal(t, int64(1), s.Receipts[0].Sequence, "one transaction, one sequence")
		states := map[string]int{}
		for _, c := range s.Candidates {
			states[c.State]++
		}
		require.Equal(t, map[string]int{models.CandidatePending: 1499, models.CandidatePresent: 1}, states)
	})
}
