package integrationtest

import (
	"context"
	"strings"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestStateKeyPlanSQLite: the reads that page a state's rows in key order
// (the due sweep's attempted rows, a page of dead operations, the default
// counts) go through the state-key index on SQLite too, which leaves
// committed rows out (migration 0017): SQLite uses a partial index only
// when the query carries its predicate's term, and without it read them
// by the primary key, past every committed row.
func TestStateKeyPlanSQLite(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	recordOp(t, e, "caller", "a")
	repo, rec := recordingRepo(t, e)
	for name, call := range map[string]func() error{
		"due sweep": func() error {
			_, err := repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(),
				ReadWinner: func(context.Context, string) (string, bool, error) { return "", false, nil }})
			return err
		},
		"dead page": func() error {
			_, err := repo.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead, Limit: 10})
			return err
		},
		"default counts": func() error {
			_, err := repo.CountOperations(ctx(t), repository.OperationCountsParams{})
			return err
		},
	} {
		require.NoError(t, call(), name)
		var reads []string
		for _, s := range rec.take() {
			if strings.HasPrefix(s, "SELECT") && strings.Contains(s, "kubun_connector_operation") {
				reads = append(reads, s)
			}
		}
		require.NotEmpty(t, reads, name)
		for _, s := range reads {
			plan := strings.Join(sqlitePlan(t, e.db, s), "\n")
			require.Contains(t, plan, "kubun_connector_operation_state_key_idx", "%s: %s\n%s", name, s, plan)
		}
	}
}
