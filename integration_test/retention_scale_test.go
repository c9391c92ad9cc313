package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// TestRetentionScaleAt1M (PostgreSQL): on 1,000,000 finished operations of
// 100 owners, every one of which the keep rules keep, half held (an
// earlier pass judged them) and half not yet judged: a finish on one
// document releases that document's holds by reading that document's held
// rows, not the held half, and queues them behind the rows waiting; and a pass scoped to one owner judges its window of
// unheld rows reading a bounded number of rows, not the other owners'; with
// statistics lagging and fresh. "Bounded" is at most ten rows read per row
// of the window (each judged row, its keep-rule probes on its document,
// its hold), never a share of the journal.
//
// Not parallel: it counts its own rows read beside a million-row insert.
func TestRetentionScaleAt1M(t *testing.T) {
	e := setup(t, pgKind)
	now := e.clock.Millis()
	seedKeptJournal(t, e, "'o' || ((g / 5) % 100)", "CAST(substr(operation_id, 4) AS INTEGER) <= 500000")
	scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("o42"))
	require.NoError(t, err)
	const limit = 100
	for _, stats := range []string{"lagging", "fresh"} {
		if stats == "fresh" {
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_pending").Error)
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_held").Error)
		}
		// A newer commit on doc-4200 (owner o42) by caller c0: its own
		// caller's older row there is now superseded by caller, but not by
		// owner, so it stays kept; the release must still reach every held
		// row of the document, and only those.
		id := "new-" + stats
		op := docRow(id, models.OperationCommitted, "c0", "o42", "doc-4200", now-1, now-1)
		seedOps(t, e, []models.Operation{op})
		read := readsOf(t, e, func(repo *repository.Repository) error {
			_, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
			return err
		})
		t.Logf("%s statistics: a pass releasing one document's holds read %d rows", stats, read)
		require.LessOrEqual(t, read, int64(10*repository.CollectBudget*limit), "%s: the release reads the document's rows", stats)
		require.Zero(t, count(t, e.db, &models.RetentionFinished{}), "%s: the queued document was consumed", stats)
		var places []int64
		require.NoError(t, e.db.Model(&models.RetentionPending{}).Where(`operation_id IN (SELECT operation_id FROM kubun_connector_operation
			WHERE document_id = 'doc-4200' AND operation_id NOT LIKE 'new-%')`).Distinct().Pluck("ord", &places).Error)
		require.Equal(t, []int64{e.clock.Millis() - 1}, places,
			"%s: the released rows wait behind the 500,000 unjudged ones, placed just before the cutoff", stats)
		require.Zero(t, count(t, e.db, &models.RetentionHeld{}, "document_id = 'doc-4200'"), "%s: released", stats)

		read = readsWith(t, e, scoped, func(repo *repository.Repository) error {
			_, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
			return err
		})
		t.Logf("%s statistics: a pass scoped to one owner of 100 read %d rows", stats, read)
		require.LessOrEqual(t, read, int64(10*repository.CollectBudget*limit), "%s: a scoped pass reads its window", stats)
	}
}
