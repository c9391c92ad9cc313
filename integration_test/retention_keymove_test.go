package integrationtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestRetentionCallerChangeOfANewerRowReleases: the analogue of
// TestRetentionOwnerChangeOfANewerRowReleases for caller_did, which
// queueChange0018 lists. a (c1,o1) and b (c2,o1, newer) on d: a is the
// newest commit of c1, held. b moves to caller c1: a is now superseded for
// its caller and its owner (collectable).
func TestRetentionCallerChangeOfANewerRowReleases(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		requireSiblingMoveReleases(t, e, docRow("b", models.OperationCommitted, "c2", "o1", "d", 2, 11), "caller_did = 'c1'")
	})
}

// TestRetentionCallerChangeKeepsTheRowsPlace: a finished row whose caller changes
// (by SQL) must keep one place (pending or held) as it stands; otherwise
// it is never judged again and, once superseded, never collected.
func TestRetentionCallerChangeKeepsTheRowsPlace(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{
			docRow("b", models.OperationCommitted, "c2", "o1", "d", 1, 10),
		})
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET caller_did = 'c1' WHERE operation_id = 'b'`).Error)
		// b is now the oldest commit of c1/o1 on d; c, newer, supersedes it.
		seedOps(t, e, []models.Operation{
			docRow("c", models.OperationCommitted, "c1", "o1", "d", 2, 11),
		})
		e.clock.Advance(time.Second)
		for range 5 {
			passWith(t, e, e.repo, "")
		}
		t.Logf("held: %v waiting: %v stored b: %v", heldIDs(t, e), waitingIDs(t, e), stored(t, e, "b"))
		require.False(t, stored(t, e, "b"), "b, superseded, is never collected (no entry for its row)")
	})
}

// TestRetentionHeldMigrationAt50k: 50,000 finished rows, a fifth held and a
// tenth with a second (released) entry; 0018 rolled back and applied again.
func TestRetentionHeldMigrationAt50k(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		if e.partitioned {
			t.Skip("plain legs only")
		}
		c := context.Background()
		const n = 50000
		rows := make([]models.Operation, 0, n)
		for i := range n {
			rows = append(rows, docRow(fmt.Sprintf("op%06d", i), models.OperationCommitted, fmt.Sprintf("c%d", i%7),
				fmt.Sprintf("o%d", i%3), fmt.Sprintf("d%d", i/5), int64(i), int64(i+1)))
		}
		start := time.Now()
		seedOps(t, e, rows)
		t.Logf("seed %v", time.Since(start))
		holdWhere(t, e.db, "operation_id LIKE '%0' OR operation_id LIKE '%5'")
		// a second entry for a tenth of the unheld rows, at a later place
		require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_retention_pending (ord, updated_at, caller_did, operation_id, owner_did, connector_name)
			SELECT updated_at + 1000000, updated_at, caller_did, operation_id, owner_did, connector_name
			FROM kubun_connector_retention_pending WHERE operation_id LIKE '%3'`).Error)
		start = time.Now()
		rollbackThrough(t, e.db, mig0018)
		t.Logf("rollback %v", time.Since(start))
		var entries int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM kubun_connector_retention_pending`).Scan(&entries).Error)
		require.EqualValues(t, n-n/5, entries, "one entry per unheld row version")
		start = time.Now()
		require.NoError(t, migrations.Migrate(c, e.db))
		t.Logf("migrate %v", time.Since(start))
		var p, h int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM kubun_connector_retention_pending`).Scan(&p).Error)
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM kubun_connector_retention_held`).Scan(&h).Error)
		t.Logf("pending %d held %d", p, h)
		require.EqualValues(t, n, p+h)
		require.EqualValues(t, n/5, h)
	})
}
