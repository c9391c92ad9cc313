package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestScopeLiterals: WithScopes accepts a scope with a literal that holds
// an @ (an e-mail-like owner excluded) or a ?, and every call applies it as
// a literal, the lease holder's writes included; the write returns the
// stored row.
func TestScopeLiterals(t *testing.T) {
	t.Parallel()
	for _, literal := range []string{"blocked@example.com", "who?"} {
		t.Run(literal, func(t *testing.T) {
			t.Parallel()
			forEachDB(t, func(t *testing.T, e *env) {
				repo, err := e.repo.WithScopes(ctx(t), func(db *gorm.DB) *gorm.DB {
					return db.Where("owner_did <> '" + literal + "'")
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
		})
	}
}
