package integrationtest

import (
	"strings"
	"time"

	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionPassBoundedAt1M (PostgreSQL): on a journal of 1,000,000
// finished operations none of which has been judged (as after adopting or
// upgrading a database), and all of which the keep rules keep, one pass of
// Limit 500 reads a bounded number of rows — its window of 4 × 500 rows,
// read twice (delete, then hold), the keep rules' probes and the rows it
// marks by their physical ids: four reads per judged row, 8,000 — with
// statistics lagging (none gathered since the insert) and fresh; the second pass holds the next
// 2,000, so it started after the first one's. The earlier pass read every
// unheld row, twice: 2,006,000 rows.
//
// Not parallel: it counts its own rows read, and a million-row journal
// beside other tests' million-row journals makes the run I/O-bound.
func TestRetentionPassBoundedAt1M(t *testing.T) {
	e := setup(t, pgKind)
	seedKeptJournal(t, e, "'o' || (g % 5)", "NULL")
	const limit = 500
	for _, stats := range []string{"lagging", "fresh"} {
		if stats == "fresh" {
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
		}
		heldBefore := count(t, e.db, &models.Operation{}, "retention_hold IS NOT NULL")
		var n int64
		read := readsOf(t, e, func(repo *repository.Repository) error {
			var err error
			n, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
			return err
		})
		require.Zero(t, n, "%s: every row is kept", stats)
		heldNow := count(t, e.db, &models.Operation{}, "retention_hold IS NOT NULL")
		t.Logf("%s statistics: one pass read %d rows, held %d", stats, read, heldNow-heldBefore)
		require.Equal(t, int64(repository.CollectBudget*limit), heldNow-heldBefore, "%s: the window is held", stats)
		require.LessOrEqual(t, read, int64(6*repository.CollectBudget*limit), "%s: rows read stay within a multiple of the limit", stats)
	}
}

// seedKeptJournal writes 1,000,000 committed operations of documents of
// five rows each, each row of its own caller, so every row is the newest
// commit of its caller on its document and the keep rules keep them all;
// owner and hold are SQL expressions of the row number g. Statistics lag
// for as long as the test decides: autovacuum is off for the table and
// none are gathered until the test runs ANALYZE. The queue of finished
// documents is emptied, as for a journal adopted with its rows.
func seedKeptJournal(t *testing.T, e *env, owner, hold string) {
	t.Helper()
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_operation SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, version, incarnation, created_at, updated_at, retention_hold)
		SELECT 'c' || (g % 5), 'op-' || g, 'n', `+owner+`, 'crm', 'm', 'update', 'a', 't', 'e' || g, 'h', '{}',
			'doc-' || (g / 5), 'committed', 0, 0, 'i', CAST(? AS BIGINT) - 2000000 + g, CAST(? AS BIGINT) - 2000000 + g,
			`+hold+`
		FROM generate_series(1, 1000000) g`, now, now).Error)
	require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
}

// TestRetentionPlanSQLite: on SQLite a pass's delete and hold read their
// window from the partial collect index in pass order — no scan of the
// operation table (the only sort is of the window's own rows, at most
// CollectBudget × Limit) — and release holds through the held index.
func TestRetentionPlanSQLite(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	seedOps(t, e, []models.Operation{
		docRow("a", models.OperationCommitted, "c1", "o1", "d", 1, 10),
		docRow("b", models.OperationCommitted, "c1", "o1", "d", 2, 11),
	})
	repo, rec := recordingRepo(t, e)
	_, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 5})
	require.NoError(t, err)
	var checked int
	for _, stmt := range rec.take() {
		upper := strings.ToUpper(stmt)
		if !strings.Contains(upper, "KUBUN_CONNECTOR_OPERATION") || strings.HasPrefix(upper, "SELECT") {
			continue
		}
		plan := strings.Join(sqlitePlan(t, e.db, stmt), "\n")
		t.Logf("%s\n%s", stmt, plan)
		require.NotRegexp(t, `SCAN kubun_connector_operation($|\n| AS)`, plan, "no scan of the operation table without an index")
		if strings.Contains(upper, "RETENTION_HOLD IS NULL") {
			require.Contains(t, plan, "kubun_connector_operation_collect_idx", plan)
		}
		checked++
	}
	require.GreaterOrEqual(t, checked, 2)
}
