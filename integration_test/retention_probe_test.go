package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionProbesOnALongDocumentAreBounded (PostgreSQL): one document with
// 5,000 commits by one caller, each for a different owner (every row is
// its owner's newest commit there, so the keep rules keep every row), all
// older than the cutoff, none judged yet. A pass of Limit 100 judges its
// window of 400 entries; the rows' "newer commit of the same caller"
// probe should find the next row, not read the document's history from
// its oldest row each time (3,843,598 rows read without the probes'
// created_at bound).
func TestRetentionProbesOnALongDocumentAreBounded(t *testing.T) {
	e := setup(t, pgKind)
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, version, incarnation, created_at, updated_at)
		SELECT 'c1', 'op-' || g, 'n', 'o' || g, 'crm', 'm', 'update', 'a', 't', 'e' || g, 'h', '{}',
			'long', 'committed', 0, 0, 'i', CAST(? AS BIGINT) - 100000 + g, CAST(? AS BIGINT) - 100000 + g
		FROM generate_series(1, 5000) g`, now, now).Error)
	require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
	// An earlier pass held the oldest 4,600 (as the passes before this one
	// would have): the window is the newest 400.
	require.NoError(t, e.db.Exec(`DELETE FROM kubun_connector_retention_pending
		WHERE CAST(substr(operation_id, 4) AS INTEGER) <= 4600`).Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_pending").Error)
	const limit = 100
	var n int64
	read := readsOf(t, e, func(repo *repository.Repository) error {
		var err error
		n, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
		return err
	})
	require.Zero(t, n, "every row is kept")
	t.Logf("one pass of limit %d read %d rows", limit, read)
	require.LessOrEqual(t, read, int64(10*repository.CollectBudget*limit), "each probe reads the document's history")
}
