package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func requireRefused(t *testing.T, e *env, provenance, reason string) {
	t.Helper()
	before := sweepSnapshot(t, e)
	_, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey(provenance))
	require.ErrorIs(t, err, repository.ErrCheckpointRefused)
	var refused *repository.CheckpointRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, reason, refused.Reason)
	require.Equal(t, before, sweepSnapshot(t, e), "a refusal changes nothing")
}

func TestCommitCheckpointRefusals(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		requireRefused(t, e, "nope", repository.RefusedReceiptMissing)

		recordReceipt(t, e, "p1", "a", "b")
		requireRefused(t, e, "p1", repository.RefusedUnresolved)
		setState(t, e, "p1", "a", models.CandidateApplied)
		setState(t, e, "p1", "b", models.CandidatePresent) // verified, not yet applied
		requireRefused(t, e, "p1", repository.RefusedUnresolved)

		recordReceipt(t, e, "p2", "c") // sequence 2
		setState(t, e, "p2", "c", models.CandidateApplied)
		requireRefused(t, e, "p2", repository.RefusedEarlierUnresolved)

		setState(t, e, "p1", "b", models.CandidateRefused)
		_, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("p1"))
		require.NoError(t, err)
		requireRefused(t, e, "p1", repository.RefusedAlreadyCommitted)

		require.NoError(t, e.db.Create(&models.SweepReceipt{OwnerDID: "owner", ConnectorName: "crm",
			Partition: "contacts", Provenance: "partial", Sequence: 9, ModelID: "m", SourceFetchHLC: "h",
			Kind: "relist", Complete: 0, CreatedAt: 1}).Error)
		requireRefused(t, e, "partial", repository.RefusedIncomplete)
	})
}

func TestCommitCheckpointEffects(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a", "b")
		setState(t, e, "p1", "a", models.CandidateApplied)
		setState(t, e, "p1", "b", models.CandidateRefused)
		e.clock.Advance(time.Second)
		res, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("p1"))
		require.NoError(t, err)
		require.Equal(t, &repository.CheckpointCommit{Sequence: 1, Advanced: true}, res)

		s := sweepSnapshot(t, e)
		require.Len(t, s.Candidates, 1, "applied deleted, refused kept for inspection")
		require.Equal(t, "b", s.Candidates[0].DocumentID)
		require.Equal(t, e.clock.Millis(), *s.Receipts[0].CommittedAt)
		cp, err := e.repo.GetSweepCheckpoint(ctx(t), partition)
		require.NoError(t, err)
		require.Equal(t, "p1", cp.Provenance)
		require.Equal(t, int64(1), cp.ReceiptSequence)
		require.Equal(t, e.clock.Millis(), cp.UpdatedAt)

		_, err = e.repo.GetSweepCheckpoint(ctx(t), repository.PartitionKey{OwnerDID: "owner", ConnectorName: "crm", Partition: "none"})
		require.ErrorIs(t, err, repository.ErrNotFound)
	})
}

// TestCheckpointMonotonic: an older receipt committing after a newer one
// is committed, but never moves the checkpoint back.
func TestCheckpointMonotonic(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "old", "a")
		recordReceipt(t, e, "new", "b")
		setState(t, e, "old", "a", models.CandidateRefused) // resolved, so "new" may commit first
		setState(t, e, "new", "b", models.CandidateApplied)

		res, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("new"))
		require.NoError(t, err)
		require.Equal(t, &repository.CheckpointCommit{Sequence: 2, Advanced: true}, res)
		e.clock.Advance(time.Second)
		res, err = e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("old"))
		require.NoError(t, err)
		require.Equal(t, &repository.CheckpointCommit{Sequence: 1, Advanced: false}, res)

		cp, err := e.repo.GetSweepCheckpoint(ctx(t), partition)
		require.NoError(t, err)
		require.Equal(t, "new", cp.Provenance)
		require.Equal(t, int64(2), cp.ReceiptSequence)
		listed, err := e.repo.ListSweepReceipts(ctx(t), repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Empty(t, listed, "both receipts committed")

		recordReceipt(t, e, "newer") // sequence 3, no candidates
		res, err = e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("newer"))
		require.NoError(t, err)
		require.Equal(t, &repository.CheckpointCommit{Sequence: 3, Advanced: true}, res)
	})
}
