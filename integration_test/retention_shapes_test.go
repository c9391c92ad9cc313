package integrationtest

import (
	"strings"
	"time"

	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// TestRetentionPassBoundedAt1M (PostgreSQL): on a journal of 1,000,000
// finished operations none of which has been judged (as after adopting or
// upgrading a database), and all of which the keep rules keep, one pass of
// Limit 500 reads a bounded number of rows — its window of 4 × 500 entries
// and their operations, each read three times (the delete, the hold, the
// settling of the entries), the row the keep rules' first probe finds (the
// row itself) in the first two, and the row's held entry in the third:
// nine reads per judged row, 18,000 (six before held rows had a table of
// their own) — with statistics lagging (none gathered since the insert)
// and fresh; the second pass holds the next 2,000, so it started after the
// first one's. The first form of the pass read every unheld row, twice:
// 2,006,000 rows.
//
// Not parallel: it counts its own rows read, and a million-row journal
// beside other tests' million-row journals makes the run I/O-bound.
func TestRetentionPassBoundedAt1M(t *testing.T) {
	e := setup(t, pgKind)
	seedKeptJournal(t, e, "'o' || (g % 5)", "")
	const limit = 500
	for _, stats := range []string{"lagging", "fresh"} {
		if stats == "fresh" {
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_pending").Error)
			require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_held").Error)
		}
		waitingBefore, heldBefore := count(t, e.db, &models.RetentionPending{}), count(t, e.db, &models.RetentionHeld{})
		var n int64
		read := readsOf(t, e, func(repo *repository.Repository) error {
			var err error
			n, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
			return err
		})
		require.Zero(t, n, "%s: every row is kept", stats)
		held := waitingBefore - count(t, e.db, &models.RetentionPending{})
		require.Equal(t, held, count(t, e.db, &models.RetentionHeld{})-heldBefore, "%s: what left the rows to judge is held", stats)
		t.Logf("%s statistics: one pass read %d rows, held %d", stats, read, held)
		require.Equal(t, int64(repository.CollectBudget*limit), held, "%s: the window is held", stats)
		require.LessOrEqual(t, read, int64(10*repository.CollectBudget*limit), "%s: rows read stay within a multiple of the limit", stats)

		// Each entry reaches its operation by the primary key: through the
		// owner index (its owner matched, its key filtered from each index
		// entry) a join read every index entry of the owner per entry, and
		// rows read by the heap above do not show it.
		repo, rec := recordingRepo(t, e)
		_, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
		require.NoError(t, err)
		for stmt, plan := range explainRecorded(t, e.db, rec.take()) {
			if strings.Contains(stmt, "kubun_connector_operation j ON") {
				require.Regexp(t, `Index Scan using kubun_connector_operation_pkey on kubun_connector_operation j\b`, plan, "%s: %s", stats, stmt)
			}
			if strings.Contains(stmt, "kubun_connector_retention_held h WHERE") {
				require.Regexp(t, `Index (Only )?Scan using kubun_connector_retention_held_pkey on kubun_connector_retention_held h\b`, plan,
					"%s: the held entry is a probe: %s", stats, stmt)
			}
		}
	}
}

// seedKeptJournal writes 1,000,000 committed operations of documents of
// five rows each, each row of its own caller, so every row is the newest
// commit of its caller on its document and the keep rules keep them all;
// owner is an SQL expression of the row number g, and held (unless empty)
// a condition on the entries of the rows to judge that an earlier pass
// held (their entries are deleted). Statistics lag for as long as the test
// decides: autovacuum is off for both tables and none are gathered until
// the test runs ANALYZE. The queue of finished documents is emptied, as
// for a journal adopted with its rows.
func seedKeptJournal(t *testing.T, e *env, owner, held string) {
	t.Helper()
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_operation SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_retention_pending SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_retention_held SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, version, incarnation, created_at, updated_at)
		SELECT 'c' || (g % 5), 'op-' || g, 'n', `+owner+`, 'crm', 'm', 'update', 'a', 't', 'e' || g, 'h', '{}',
			'doc-' || (g / 5), 'committed', 0, 0, 'i', CAST(? AS BIGINT) - 2000000 + g, CAST(? AS BIGINT) - 2000000 + g
		FROM generate_series(1, 1000000) g`, now, now).Error)
	if held != "" {
		holdWhere(t, e.db, held)
	}
	require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
}

// TestRetentionPlanSQLite: on SQLite a pass reads its window from the
// table of rows to judge in pass order, by its primary key (by its owner
// index under a scope naming an owner), and reaches the operations by
// theirs — no scan of either table (the only sort is of the window's own
// rows, at most CollectBudget × Limit) — and releases holds through the
// document index.
func TestRetentionPlanSQLite(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	seedOps(t, e, []models.Operation{
		docRow("a", models.OperationCommitted, "c1", "o1", "d", 1, 10),
		docRow("b", models.OperationCommitted, "c1", "o1", "d", 2, 11),
	})
	require.NoError(t, e.db.Create(&models.RetentionFinished{DocumentID: "d"}).Error)
	repo, rec := recordingRepo(t, e)
	scoped, err := repo.WithScopes(ctx(t), scopes.Owner("o1"))
	require.NoError(t, err)
	for _, r := range []*repository.Repository{repo, scoped} {
		rec.take()
		_, err := r.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 5})
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
			require.NotRegexp(t, `SCAN kubun_connector_retention_pending($|\n| AS)`, plan, "no scan of the rows to judge")
			require.NotRegexp(t, `SCAN (kubun_connector_retention_held|h)($|\n| AS)`, plan, "no scan of the held rows")
			require.NotRegexp(t, `SCAN (j|o)($|\n)`, plan, "no scan of the operation table under an alias")
			if r == scoped && strings.Contains(upper, "KUBUN_CONNECTOR_RETENTION_PENDING") && strings.Contains(stmt, "o1") {
				require.Contains(t, plan, "kubun_connector_retention_pending_owner_idx", "a scoped window reads its owner's rows")
			}
			checked++
		}
		require.GreaterOrEqual(t, checked, 2, "the delete and the hold")
	}
}
