package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestCommitCheckpointAtomicOnKill: a CommitSweepCheckpoint whose backend is
// terminated mid-transaction (after the checkpoint upsert, while deleting
// applied candidates) leaves checkpoint, candidates and receipt as before.
func TestCommitCheckpointAtomicOnKill(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	recordReceipt(t, e, "p1", "a", "b")
	setState(t, e, "p1", "a", models.CandidateApplied)
	setState(t, e, "p1", "b", models.CandidateRefused)
	before := sweepSnapshot(t, e)

	// Hold a lock on the applied candidate so the commit stalls at its DELETE.
	blocker, blockerPID := lockHolder(t, e.db)
	require.NoError(t, blocker.Exec(`SELECT 1 FROM kubun_connector_sweep_candidate
		WHERE document_id = 'a' FOR UPDATE`).Error)

	done := make(chan error, 1)
	go func() {
		_, err := e.repo.CommitSweepCheckpoint(context.Background(), receiptKey("p1"))
		done <- err
	}()

	victim := waitBlockedBy(t, e.db, blockerPID)

	var upserted int64
	require.NoError(t, e.db.Raw(`SELECT count(*) FROM pg_locks WHERE pid = ? AND mode = 'RowExclusiveLock'
		AND relation = 'kubun_connector_sweep_checkpoint'::regclass`, victim).Scan(&upserted).Error)
	require.Equal(t, int64(1), upserted, "the checkpoint upsert ran inside the killed transaction")

	require.NoError(t, e.db.Exec(`SELECT pg_terminate_backend(?)`, victim).Error)
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("commit did not return after its backend was terminated")
	}
	require.NoError(t, blocker.Rollback().Error)
	require.Equal(t, before, sweepSnapshot(t, e))
	require.Empty(t, before.Checkpoints)
}
