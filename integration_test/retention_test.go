package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// finished builds a finished operation for retention tests.
func finished(id, caller, owner, state string, doc *string, created, updated int64) models.Operation {
	op := dbtest.OpRow(0, state, nil, created)
	op.OperationID, op.CallerDID, op.OwnerDID, op.DocumentID, op.UpdatedAt = id, caller, owner, doc, updated
	return op
}

func remaining(t *testing.T, e *env) []string {
	t.Helper()
	var rows []models.Operation
	require.NoError(t, e.db.Order("operation_id").Find(&rows).Error)
	return ids(rows)
}

func collect(t *testing.T, e *env, before time.Time, limit int) int64 {
	t.Helper()
	n, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: before, Limit: limit})
	require.NoError(t, err)
	return n
}

// TestRetentionKeepRules: target X (caller c1, owner o1) on document d is
// collected only when newer rows supersede it for its caller and its owner.
func TestRetentionKeepRules(t *testing.T) {
	t.Parallel()
	d := models.StrPtr("d")
	const c, dd = models.OperationCommitted, models.OperationDead
	cases := []struct {
		name   string
		rows   []models.Operation
		cutoff int64 // epoch ms; 0 means the clock's now
		kept   []string
	}{
		{"no document: collected", []models.Operation{finished("x", "c1", "o1", c, nil, 10, 10)}, 0, nil},
		{"superseded for caller and owner", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("n1", "c1", "o2", c, d, 20, 20),
			finished("n2", "c2", "o1", c, d, 20, 20)}, 0, []string{"n1", "n2"}},
		{"newest commit of its caller", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("n2", "c2", "o1", c, d, 20, 20)}, 0, []string{"n2", "x"}},
		{"newest commit of its owner", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("n1", "c1", "o2", c, d, 20, 20)}, 0, []string{"n1", "x"}},
		{"caller's newer row is only dead", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("n1", "c1", "o2", dd, d, 20, 20),
			finished("n2", "c2", "o1", c, d, 20, 20)}, 0, []string{"n1", "n2", "x"}},
		{"dead superseded by dead rows", []models.Operation{
			finished("x", "c1", "o1", dd, d, 10, 10), finished("n1", "c1", "o2", dd, d, 20, 20),
			finished("n2", "c2", "o1", dd, d, 20, 20)}, 0, []string{"n1", "n2"}},
		{"dead is the newest finished row of its owner", []models.Operation{
			finished("x", "c1", "o1", dd, d, 30, 10), finished("n1", "c1", "o2", c, d, 20, 20),
			finished("n2", "c2", "o1", c, d, 20, 20)}, 0, []string{"n1", "n2", "x"}},
		{"tie on created_at broken by caller then id", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("z1", "c1", "o2", c, d, 10, 20),
			finished("n2", "c2", "o1", c, d, 10, 20)}, 0, []string{"n2", "z1"}},
		{"tie with a smaller id is older", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("a1", "c1", "o2", c, d, 10, 20),
			finished("n2", "c2", "o1", c, d, 10, 20)}, 0, []string{"a1", "n2", "x"}},
		{"other document does not supersede", []models.Operation{
			finished("x", "c1", "o1", c, d, 10, 10), finished("n1", "c1", "o1", c, models.StrPtr("e"), 20, 20)},
			0, []string{"n1", "x"}},
		{"written at or after the cutoff", []models.Operation{finished("x", "c1", "o1", c, nil, 10, 10)},
			10, []string{"x"}},
		{"attempted and reconcile_only are never collected", []models.Operation{
			finished("x", "c1", "o1", models.OperationAttempted, nil, 10, 10),
			finished("y", "c1", "o1", models.OperationReconcileOnly, nil, 10, 10)}, 0, []string{"x", "y"}},
	}
	forEachDB(t, func(t *testing.T, e *env) {
		for _, tc := range cases {
			require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_operation").Error)
			seedOps(t, e, tc.rows)
			cutoff := e.clock.Now()
			if tc.cutoff != 0 {
				cutoff = time.UnixMilli(tc.cutoff)
			}
			collect(t, e, cutoff, 100)
			require.Equal(t, tc.kept, nilIfEmpty(remaining(t, e)), tc.name)
		}
	})
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestRetentionLeaseAndLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Now()
		rows := []models.Operation{
			finished("a", "c", "o", models.OperationCommitted, nil, 1, 30),
			finished("b", "c", "o", models.OperationDead, nil, 1, 10),
			finished("c", "c", "o", models.OperationCommitted, nil, 1, 20),
			finished("live", "c", "o", models.OperationCommitted, nil, 1, 5),
			finished("expired", "c", "o", models.OperationDead, nil, 1, 40),
		}
		rows[3].LeaseToken, rows[3].LeaseExpiresAt = models.StrPtr("t"), ms(now.Add(time.Second))
		rows[4].LeaseToken, rows[4].LeaseExpiresAt = models.StrPtr("t"), ms(now.Add(-time.Second))
		seedOps(t, e, rows)
		require.Equal(t, int64(2), collect(t, e, now, 2))
		require.Equal(t, []string{"a", "expired", "live"}, remaining(t, e), "oldest updated_at first, live lease kept")
		require.Equal(t, int64(2), collect(t, e, now, 10))
		require.Equal(t, []string{"live"}, remaining(t, e))
	})
}

func TestRetentionBadParams(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{finished("a", "c", "o", models.OperationCommitted, nil, 1, 1)})
		for name, p := range map[string]repository.CollectParams{
			"zero before":     {Limit: 10},
			"negative before": {Before: time.UnixMilli(-1), Limit: 10},
			"zero limit":      {Before: e.clock.Now()},
			"negative limit":  {Before: e.clock.Now(), Limit: -1},
		} {
			n, err := e.repo.CollectFinishedOperations(ctx(t), p)
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
			require.Zero(t, n)
		}
		require.Equal(t, []string{"a"}, remaining(t, e))
	})
}
