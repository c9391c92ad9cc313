package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionReleaseAtTheCutoffEdgeDoesNotDeadlock: r, held, was last
// written just before the pass's cutoff (updated_at 50, cutoff 51), so the
// release places it at its own updated_at, in the pass's window; a newer
// finish on its document (s) makes it collectable. While the pass is held
// up deleting x (locked by a blocker), a writer moves r to another owner
// by SQL, keeping its updated_at: the writer's trigger writes r's new
// entry in the very place the release wrote one. When the release only
// wrote entries, the writer (holding r) waited on the pass's entry, and
// the pass, once the blocker let go, on the writer's r: PostgreSQL aborted
// one of them (40P01). The release now locks the rows it puts back
// (skipping a row another transaction holds, and leaving its document
// queued), so the writer waits on the pass at r itself and nothing waits
// the other way.
func TestRetentionReleaseAtTheCutoffEdgeDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	x := docRow("x", models.OperationCommitted, "c1", "o1", "-", 1, 50) // no document: collectable
	x.DocumentID = nil
	// Seeded in this order: the pass's delete locks rows in physical order,
	// x before r.
	seedOps(t, e, []models.Operation{x})
	seedOps(t, e, []models.Operation{docRow("r", models.OperationDead, "c1", "o1", "d", 1, 50)})
	holdWhere(t, e.db, "operation_id = 'r'")
	require.True(t, held(t, e, "r"))
	seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c1", "o1", "d", 2, 50)}) // queues d

	blocker, blockerPID := lockHolder(t, e.db)
	require.NoError(t, blocker.Exec(`SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'x' FOR UPDATE`).Error)
	passed := make(chan error, 1)
	go func() {
		_, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: time.UnixMilli(51), Limit: 10})
		passed <- err
	}()
	passPID := waitBlockedBy(t, e.db, blockerPID) // released d, deleting x
	written := make(chan error, 1)
	go func() {
		written <- e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o2' WHERE operation_id = 'r'`).Error
	}()
	waitBlockedBy(t, e.db, passPID) // the writer (on r's entry before, on r now)
	require.NoError(t, blocker.Rollback().Error)
	passErr, writeErr := <-passed, <-written
	t.Logf("pass: %v; writer: %v", passErr, writeErr)
	require.NoError(t, passErr, "the pass")
	require.NoError(t, writeErr, "the writer")
	require.Zero(t, count(t, e.db, &models.Operation{}, "operation_id IN ?", []string{"x", "r"}), "x and r collected")
	require.True(t, held(t, e, "s"), "s, the newest on d, held")
}

// TestRetentionReleaseSkipsARowAWriterHolds: a transaction holds r, a held
// row of d, when a pass consumes d's finish. The pass neither waits for it
// nor releases d: it finishes while r is held, and d is queued again. Once
// the writer is gone, the next pass releases d and collects r.
func TestRetentionReleaseSkipsARowAWriterHolds(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{docRow("r", models.OperationDead, "c1", "o1", "d", 1, 10)})
		holdWhere(t, e.db, "operation_id = 'r'")
		seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c1", "o1", "d", 2, 20)}) // queues d
		writer, _ := lockHolder(t, e.db)
		require.NoError(t, writer.Exec(`SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'r' FOR UPDATE`).Error)
		pass := func() int64 {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n, err := e.repo.CollectFinishedOperations(c, repository.CollectParams{Before: time.UnixMilli(30), Limit: 10})
			require.NoError(t, err, "the pass does not wait on the writer")
			return n
		}
		require.Zero(t, pass())
		require.True(t, held(t, e, "r"), "r stays held while the writer has it")
		require.Equal(t, int64(1), count(t, e.db, &models.RetentionFinished{}, "document_id = ?", "d"), "d queued again")
		require.Zero(t, pass(), "still held: d queued again, once")
		require.Equal(t, int64(1), count(t, e.db, &models.RetentionFinished{}, "document_id = ?", "d"))
		require.NoError(t, writer.Rollback().Error)
		require.Equal(t, int64(1), pass(), "r collected")
		require.Zero(t, count(t, e.db, &models.Operation{}, "operation_id = ?", "r"))
		require.True(t, held(t, e, "s"))
		require.Zero(t, count(t, e.db, &models.RetentionFinished{}))
	})
}
