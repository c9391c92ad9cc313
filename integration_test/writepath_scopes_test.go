package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestScopeLiteralWithAtSign: WithScopes accepts a scope naming
// owner_did with a literal (an e-mail-like owner excluded); every call
// applies it, the lease holder's writes included.
func TestScopeLiteralWithAtSign(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := e.repo.WithScopes(ctx(t), func(db *gorm.DB) *gorm.DB {
			return db.Where("owner_did <> 'blocked@example.com'")
		})
		require.NoError(t, err)
		_, _, err = repo.RecordOperation(ctx(t), opInput("caller", "op"))
		require.NoError(t, err)
		ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		_, err = repo.HeartbeatOperation(ctx(t), repository.FenceOf(&ops[0]), time.Minute)
		require.NoError(t, err)
	})
}

// TestScopeLiteralWithQuestionMark: as above, with a literal that
// holds a question mark.
func TestScopeLiteralWithQuestionMark(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := e.repo.WithScopes(ctx(t), func(db *gorm.DB) *gorm.DB {
			return db.Where("owner_did <> 'who?'")
		})
		require.NoError(t, err)
		_, _, err = repo.RecordOperation(ctx(t), opInput("caller", "op"))
		require.NoError(t, err)
		ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		w, err := repo.HeartbeatOperation(ctx(t), repository.FenceOf(&ops[0]), 2*time.Minute)
		require.NoError(t, err)
		got, err := repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
		require.NoError(t, err)
		require.Equal(t, *got, *w)
	})
}
