package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// retriedAtLeast is a user's own scope, composed with the library's.
func retriedAtLeast(n int64) scopes.Scope {
	return func(db *gorm.DB) *gorm.DB { return db.Where("attempts >= ?", n) }
}

func TestScopesCompose(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Now()
		rows := []models.Operation{
			dbtest.OpRow(1, models.OperationAttempted, nil, 1), dbtest.OpRow(2, models.OperationAttempted, nil, 1),
			dbtest.OpRow(3, models.OperationAttempted, ms(now.Add(time.Hour)), 1), dbtest.OpRow(4, models.OperationDead, nil, 1),
			dbtest.OpRow(5, models.OperationAttempted, nil, 1),
		}
		rows[0].Attempts, rows[2].Attempts, rows[3].Attempts, rows[4].Attempts = 3, 3, 3, 3
		rows[4].LeaseToken, rows[4].LeaseExpiresAt = models.StrPtr("held"), ms(now.Add(time.Minute))
		seedOps(t, e, rows)

		var got []models.Operation
		require.NoError(t, e.db.Scopes(
			scopes.Connector("crm"), scopes.Owner("owner"), scopes.State(models.OperationAttempted),
			scopes.Due(now), scopes.LeaseFree(now), retriedAtLeast(2),
		).Order("operation_id").Find(&got).Error)
		require.Equal(t, []string{"op-000001"}, ids(got))

		require.NoError(t, e.db.Scopes(scopes.NotIn("state", models.OperationAttempted), retriedAtLeast(1)).
			Find(&got).Error)
		require.Equal(t, []string{"op-000004"}, ids(got))

		sql := e.db.ToSQL(func(tx *gorm.DB) *gorm.DB {
			return tx.Scopes(scopes.LeaseHeld("tok", now)).Find(&[]models.Operation{})
		})
		require.Regexp(t, `lease_token.? = .tok. AND .lease_expires_at.? >= \d+`, sql)
	})
}
