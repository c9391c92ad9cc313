package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestRetentionUpgradeKeepsHolds: migration 0017 replaces the hold column
// with the table of rows to judge. On a journal migrated up to 0016 with
// held and unheld rows, and a finish queued on one held row's document:
// the table starts with exactly the finished rows not held; held rows stay
// held (no pass judges them again) until a finish on their document
// releases them, the queued one included; the column and its indexes are
// gone. Rolling back restores the column, every row unheld, and migrating
// again starts the table with every finished row.
func TestRetentionUpgradeKeepsHolds(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := context.Background()
		rollbackTo0016(t, e)
		require.True(t, e.db.Migrator().HasColumn("kubun_connector_operation", "retention_hold"))
		seedOps(t, e, []models.Operation{
			docRow("unheld", models.OperationCommitted, "c1", "o1", "d1", 1, 10),
			docRow("held", models.OperationCommitted, "c1", "o1", "d2", 1, 10),
			docRow("released", models.OperationCommitted, "c1", "o1", "d3", 1, 10),
			docRow("attempted", models.OperationAttempted, "c1", "o1", "d1", 2, 10),
		})
		dead := docRow("no-doc", models.OperationDead, "c1", "o1", "x", 1, 10)
		dead.DocumentID = nil
		seedOps(t, e, []models.Operation{dead})
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET retention_hold = 1
			WHERE operation_id IN ('held', 'released')`).Error)
		require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
		require.NoError(t, e.db.Create(&models.RetentionFinished{DocumentID: "d3"}).Error)

		require.NoError(t, migrations.Migrate(c, e.db))
		require.False(t, e.db.Migrator().HasColumn("kubun_connector_operation", "retention_hold"))
		for _, ix := range []string{"collect_idx", "collect_owner_idx", "held_idx"} {
			require.False(t, e.db.Migrator().HasIndex("kubun_connector_operation", "kubun_connector_operation_"+ix), ix)
		}
		require.Equal(t, []string{"no-doc", "unheld"}, waitingIDs(t, e), "the finished rows not held")

		// The first pass releases d3's held row (its finish was queued before
		// the upgrade), deletes the row without a document, and holds the
		// rest: each is its caller's newest commit on its document.
		require.EqualValues(t, 1, collect(t, e, e.clock.At(time.Hour), 10))
		require.Empty(t, waitingIDs(t, e))
		for _, id := range []string{"unheld", "held", "released"} {
			require.True(t, held(t, e, id), id)
		}
		// A newer commit on d2 releases its held row, which is then collected.
		e.clock.Advance(time.Second)
		seedOps(t, e, []models.Operation{docRow("newer", models.OperationCommitted, "c1", "o1", "d2", 5, 11)})
		require.EqualValues(t, 1, collect(t, e, e.clock.At(time.Hour), 10))
		require.False(t, stored(t, e, "held"))

		rollbackTo0016(t, e)
		require.Zero(t, count(t, e.db, &models.Operation{}, "retention_hold IS NOT NULL"), "every row unheld")
		require.NoError(t, migrations.Migrate(c, e.db))
		require.Equal(t, []string{"newer", "released", "unheld"}, waitingIDs(t, e), "every finished row, judged again")
	})
}

// rollbackTo0016 rolls back every migration from 0017 on.
func rollbackTo0016(t *testing.T, e *env) {
	t.Helper()
	rollbackThrough(t, e.db, mig0017)
}

// TestRetentionHeldUpgrade: migration 0018 gives held rows a table by
// document. On a journal at 0017 with held rows (finished, no entry among
// the rows to judge) on two documents, unheld ones, and a finish queued
// on one held row's document: the held table starts with exactly the held
// rows that have a document; the queued finish releases its document's
// held row and no other; a later finish releases the other. Rolling back
// drops the table and leaves the held rows held, as 0017 has them.
func TestRetentionHeldUpgrade(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := context.Background()
		rollbackThrough(t, e.db, mig0018)
		require.False(t, e.db.Migrator().HasTable(&models.RetentionHeld{}))
		seedOps(t, e, []models.Operation{
			docRow("unheld", models.OperationCommitted, "c1", "o1", "d1", 1, 10),
			docRow("held", models.OperationCommitted, "c1", "o1", "d2", 1, 10),
			docRow("released", models.OperationCommitted, "c1", "o1", "d3", 1, 10),
			docRow("attempted", models.OperationAttempted, "c1", "o1", "d1", 2, 10),
		})
		require.NoError(t, e.db.Exec(`DELETE FROM kubun_connector_retention_pending
			WHERE operation_id IN ('held', 'released')`).Error)
		require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
		require.NoError(t, e.db.Create(&models.RetentionFinished{DocumentID: "d3"}).Error)

		require.NoError(t, migrations.Migrate(c, e.db))
		require.Equal(t, []string{"held", "released"}, heldIDs(t, e), "the rows without an entry, by document")
		require.Equal(t, []string{"unheld"}, waitingIDs(t, e))
		require.Zero(t, collect(t, e, e.clock.At(time.Hour), 10))
		require.Equal(t, []string{"held", "released", "unheld"}, heldIDs(t, e), "d3 released, judged again and kept")
		e.clock.Advance(time.Second)
		seedOps(t, e, []models.Operation{docRow("newer", models.OperationCommitted, "c1", "o1", "d2", 5, 11)})
		require.EqualValues(t, 1, collect(t, e, e.clock.At(time.Hour), 10))
		require.False(t, stored(t, e, "held"), "released by the newer commit on d2, and collected")
		require.Equal(t, []string{"newer", "released", "unheld"}, heldIDs(t, e))

		rollbackThrough(t, e.db, mig0018)
		require.False(t, e.db.Migrator().HasTable(&models.RetentionHeld{}))
		require.Empty(t, waitingIDs(t, e), "held rows stay held")
		// 0017's triggers are back: a change to a held row has it judged again.
		finishAt(t, e.db, "unheld", 12)
		require.Equal(t, []string{"unheld"}, waitingIDs(t, e))
		require.NoError(t, migrations.Migrate(c, e.db))
		require.Equal(t, []string{"newer", "released"}, heldIDs(t, e))
	})
}

// heldIDs lists, sorted, the operations among the held rows.
func heldIDs(t *testing.T, e *env) []string {
	t.Helper()
	ids := []string{}
	require.NoError(t, e.db.Model(&models.RetentionHeld{}).Order("operation_id").Pluck("operation_id", &ids).Error)
	return ids
}

// waitingIDs lists, sorted, the operations among the rows to judge.
func waitingIDs(t *testing.T, e *env) []string {
	t.Helper()
	ids := []string{}
	require.NoError(t, e.db.Model(&models.RetentionPending{}).Order("operation_id").Pluck("operation_id", &ids).Error)
	return ids
}

// TestRetentionUpgradeWaitsForWriters (PostgreSQL): a finish committing
// while migration 0017 runs is among the rows to judge afterwards. The
// migration locks the journal against writers before it copies the
// finished rows, so the finish commits either before the copy (and is
// copied) or after the triggers exist (and enters through them). Without
// the lock, the copy ran before the finish committed and the triggers were
// created after it: the row was never judged.
func TestRetentionUpgradeWaitsForWriters(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	c := context.Background()
	rollbackTo0016(t, e)
	seedOps(t, e, []models.Operation{docRow("late", models.OperationAttempted, "c1", "o1", "d", 1, 10)})
	writer := openDSN(t, e.kind, e.dsn).Begin()
	require.NoError(t, writer.Error)
	finishAt(t, writer, "late", 20)
	var writerPID int64
	require.NoError(t, writer.Raw("SELECT pg_backend_pid()").Scan(&writerPID).Error)
	done := make(chan error, 1)
	go func() { done <- migrations.Migrate(c, e.db) }()
	// The migration waits on the writer's lock.
	require.Eventually(t, func() bool {
		var waiting int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM pg_stat_activity
			WHERE CAST(? AS integer) = ANY (pg_blocking_pids(pid))`, writerPID).Scan(&waiting).Error)
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, writer.Commit().Error)
	require.NoError(t, <-done)
	require.Equal(t, []string{"late"}, waitingIDs(t, e), "the finish waits to be judged")
}

// TestRetentionHeldUpgradeIgnoresStaleEntries: migration 0018 takes a
// finished row whose only entry among the rows to judge no longer records
// it (another owner: a writer changed the row while a pass handled it) for
// held, as a pass would: the pass after the upgrade drops the stale entry,
// and a row counted as waiting through it would be in neither table, never
// collected once a newer commit supersedes it.
func TestRetentionHeldUpgradeIgnoresStaleEntries(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := context.Background()
		rollbackThrough(t, e.db, mig0018)
		seedOps(t, e, []models.Operation{docRow("r", models.OperationCommitted, "c1", "o1", "d", 1, 10)})
		require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_retention_finished").Error)
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_retention_pending SET owner_did = 'stale'
			WHERE operation_id = 'r'`).Error)
		require.NoError(t, migrations.Migrate(c, e.db))
		require.Equal(t, []string{"r"}, heldIDs(t, e), "held: its only entry is stale")
		e.clock.Advance(time.Second)
		seedOps(t, e, []models.Operation{docRow("n", models.OperationCommitted, "c1", "o1", "d", 2, 11)})
		for range 3 {
			passWith(t, e, e.repo, "")
		}
		require.False(t, stored(t, e, "r"), "released by the newer commit and collected")
	})
}
