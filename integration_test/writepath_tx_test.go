package integrationtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestCallerTxRollbackUndoesClaimAndCommit: the claim and the
// fenced write inside a caller's transaction run on it: rolled back, the
// operation is as recorded; a concurrent reader outside never saw them.
func TestCallerTxRollbackUndoesClaimAndCommit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, _, err := e.repo.RecordOperation(ctx(t), opInput("caller", "op"))
		require.NoError(t, err)
		before, err := e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
		require.NoError(t, err)
		boom := errors.New("boom")
		err = e.repo.Transaction(ctx(t), func(tx *gorm.DB, repo *repository.Repository) error {
			ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			w, err := repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&ops[0]), DocumentID: models.StrPtr("d")})
			require.NoError(t, err)
			in, err := repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
			require.NoError(t, err)
			require.Equal(t, *in, *w.Operation)
			return boom
		})
		require.ErrorIs(t, err, boom)
		after, err := e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
		require.NoError(t, err)
		require.Equal(t, *before, *after)
	})
}

// TestDeadlineMidWrite: a fenced write whose context ends while
// the UPDATE waits on a row lock returns the context's error and changes
// nothing.
func TestDeadlineMidWrite(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	_, _, err := e.repo.RecordOperation(ctx(t), opInput("caller", "op"))
	require.NoError(t, err)
	ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	tx := e.db.Begin()
	require.NoError(t, tx.Exec("SELECT 1 FROM kubun_connector_operation FOR UPDATE").Error)
	var holder int64
	require.NoError(t, tx.Raw("SELECT pg_backend_pid()").Scan(&holder).Error)
	c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	_, err = e.repo.HeartbeatOperation(c, repository.FenceOf(&ops[0]), 5*time.Minute)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	// The server cancels the waiting UPDATE asynchronously: wait until it is
	// gone before releasing the lock (otherwise it may still run and commit,
	// as with any client-side cancel).
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM pg_stat_activity WHERE ? = ANY (pg_blocking_pids(pid))`, holder).Scan(&n).Error)
		return n == 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, tx.Rollback().Error)
	got, err := e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
	require.NoError(t, err)
	require.Equal(t, *ops[0].LeaseExpiresAt, *got.LeaseExpiresAt)
}
