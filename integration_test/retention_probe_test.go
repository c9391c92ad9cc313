package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
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
// created_at bound). Each entry costs 13 reads: itself and its row in each
// of the pass's three statements, two reads of the caller probe (the row
// itself, then the next) in the first two, and its held entry in the
// third.
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
	holdWhere(t, e.db, "CAST(substr(operation_id, 4) AS INTEGER) <= 4600")
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
	require.LessOrEqual(t, read, int64(15*repository.CollectBudget*limit), "each probe reads the document's history")
}

// TestRetentionReleaseOfALongDocumentIsBounded (PostgreSQL): a document
// with 20,000 commits still inside the cutoff (finished, not judged yet)
// gets one more; the pass after it releases the document's held rows, of
// which there are none, and should read what its window holds, not the
// document's finished rows (40,004 rows read when a release put every
// finished row of the document back among the rows to judge).
func TestRetentionReleaseOfALongDocumentIsBounded(t *testing.T) {
	e := setup(t, pgKind)
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, version, incarnation, created_at, updated_at)
		SELECT 'c1', 'op-' || g, 'n', 'o' || g, 'crm', 'm', 'update', 'a', 't', 'e' || g, 'h', '{}',
			'hot', 'committed', 0, 0, 'i', CAST(? AS BIGINT) + g, CAST(? AS BIGINT) + g
		FROM generate_series(1, 20000) g`, now, now).Error)
	require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_retention_pending").Error)
	// One more commit on the document: its finish queues the document.
	seedOps(t, e, []models.Operation{docRow("last", models.OperationAttempted, "c1", "o-last", "hot", now+30000, now+30000)})
	finishAt(t, e.db, "last", now+30000)
	const limit = 100
	var n int64
	read := readsOf(t, e, func(repo *repository.Repository) error {
		var err error
		// The cutoff is before every row: nothing is judged, the release
		// alone does the work.
		n, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(-time.Second), Limit: limit})
		return err
	})
	require.Zero(t, n)
	t.Logf("the pass after a finish on a 20,000-row document read %d rows", read)
	require.LessOrEqual(t, read, int64(repository.CollectBudget*limit), "a release reads the document's finished rows")
	require.Zero(t, count(t, e.db, &models.RetentionFinished{}), "the release consumed the queue")
}
