package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
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

// TestRetentionPassesReadHeldRowsByKey (PostgreSQL): on a journal of
// 10,000 finished operations of documents of five (as the bench's), with
// statistics gathered before any pass (the held rows' table empty), pass
// after pass reads the held rows it touches, not the held rows there are.
// The delete trigger takes each deleted row's held entry out by a probe
// of the held rows' primary key; written as a join, it was planned as a
// walk of every held entry matched against the statement's rows, so each
// pass read more held entries than the last (1,305 at the fifth pass, 200
// ms of comparisons in the trigger; 152 now).
func TestRetentionPassesReadHeldRowsByKey(t *testing.T) {
	e := setup(t, pgKind)
	now := e.clock.Millis() - 3_600_000
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, next_attempt_at, version, incarnation,
		created_at, updated_at)
		SELECT 'caller-' || (g / 5 % 50), 'op-' || g, 'n', 'owner-' || (g / 5 % 100), 'crm', 'm', 'update', 'a', 't',
			'e' || g, 'h', '{}', 'doc-' || (g / 5),
			CASE WHEN g % 100 = 0 THEN 'attempted' WHEN g % 7 = 0 THEN 'dead' ELSE 'committed' END,
			0, CAST(? AS BIGINT) + g % 1000, 0, 'i', CAST(? AS BIGINT) + g, CAST(? AS BIGINT) + g
		FROM generate_series(1, 10000) g`, now, now, now).Error)
	require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
	require.NoError(t, e.db.Exec("ANALYZE").Error)
	const limit = 500
	for pass := range 8 {
		var read int64
		require.NoError(t, e.db.Transaction(func(tx *gorm.DB) error {
			reads := func() (v int64) {
				require.NoError(t, tx.Raw(`SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)
					FROM pg_stat_xact_user_tables WHERE relid = 'kubun_connector_retention_held'::regclass`).Scan(&v).Error)
				return v
			}
			start := reads()
			_, err := e.repo.WithTx(tx).CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: limit})
			read = reads() - start
			return err
		}))
		held := count(t, e.db, &models.RetentionHeld{})
		t.Logf("pass %d read %d held entries, %d held", pass, read, held)
		if pass >= 4 {
			require.LessOrEqual(t, read, int64(limit), "pass %d reads the held rows (%d of them)", pass, held)
		}
	}
}
