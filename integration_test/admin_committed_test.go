package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestCommittedPageWithBacklogStatistics (PostgreSQL): statistics gathered
// while the journal was a backlog (every row attempted or dead), then the
// backlog committed (98%) before the next ANALYZE. A page of 50 committed
// operations still reads a page's worth: the planner, told committed rows
// are rare, must have an index that holds them in key order, or it reads
// them all and sorts them (a state key index without committed rows read
// the whole journal here).
//
// Not parallel: it counts its own rows read beside a large insert.
func TestCommittedPageWithBacklogStatistics(t *testing.T) {
	e := setup(t, pgKind)
	insertJournal(t, e, 200000, `CASE g % 50 WHEN 1 THEN 'dead' ELSE 'attempted' END`)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
	require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET state = 'committed'
		WHERE account_key NOT IN ('a0', 'a1')`).Error)
	require.NoError(t, e.db.Exec("VACUUM kubun_connector_operation").Error) // visibility, not statistics
	for _, p := range []repository.ListByStateParams{
		{State: models.OperationCommitted, Limit: 50},
		{State: models.OperationCommitted, Limit: 50, After: &repository.ListCursor{OperationKey: repository.OperationKey{CallerDID: "c3", OperationID: "op-5"}, Seq: 5}},
		{State: models.OperationDead, Limit: 50},
	} {
		requirePageReadsAPage(t, e, "statistics from the backlog", p)
	}
}

// TestCountCommittedOnABacklog (PostgreSQL): on a journal that is mostly
// backlog (200,000 rows, 2% committed), counting the committed operations
// reads the rows it counts, not the journal.
//
// Not parallel: it counts its own rows read beside a large insert.
func TestCountCommittedOnABacklog(t *testing.T) {
	e := setup(t, pgKind)
	insertJournal(t, e, 200000, `CASE g % 50 WHEN 0 THEN 'committed' ELSE 'attempted' END`)
	require.NoError(t, e.db.Exec("VACUUM ANALYZE kubun_connector_operation").Error)
	var counts []repository.OperationCount
	read := readsOf(t, e, func(repo *repository.Repository) error {
		var err error
		counts, err = repo.CountOperations(ctx(t), repository.OperationCountsParams{States: []string{models.OperationCommitted}})
		return err
	})
	var total int64
	for _, c := range counts {
		total += c.Count
	}
	require.Equal(t, int64(4000), total)
	t.Logf("counting %d committed operations read %d rows", total, read)
	require.LessOrEqual(t, read, 2*total, "the count reads the rows it counts")
}
