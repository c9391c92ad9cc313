package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionRecheckKeepsRowLeasedMeanwhile: on Postgres (READ COMMITTED)
// a row the DELETE chose, but that a lease was taken on before the DELETE
// could lock it, survives: the DELETE re-checks lease and updated_at on the
// row version it deletes.
func TestRetentionRecheckKeepsRowLeasedMeanwhile(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	seedOps(t, e, []models.Operation{
		finished("x", "c", "o", models.OperationCommitted, nil, 1, 1),
		finished("y", "c", "o", models.OperationCommitted, nil, 1, 2),
	})

	// A concurrent writer leases x and has not committed yet.
	writer, writerPID := lockHolder(t, e.db)
	require.NoError(t, writer.Exec(`UPDATE kubun_connector_operation SET lease_token = 'w',
		lease_expires_at = ?, updated_at = ? WHERE operation_id = 'x'`,
		e.clock.At(time.Hour).UnixMilli(), e.clock.Millis()).Error)

	done := make(chan int64, 1)
	go func() {
		n, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: e.clock.At(-time.Hour), Limit: 10})
		if err != nil {
			n = -1
		}
		done <- n
	}()
	waitBlockedBy(t, e.db, writerPID) // the DELETE waits on the leased row
	require.NoError(t, writer.Commit().Error)

	select {
	case n := <-done:
		require.Equal(t, int64(1), n, "only y is deleted")
	case <-time.After(20 * time.Second):
		t.Fatal("retention did not finish")
	}
	require.Equal(t, []string{"x"}, remaining(t, e))
}
