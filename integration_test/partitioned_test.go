package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestPartitionedLayoutIsPartitioned: the partitioned leg's tables really
// are partitioned after the migrations adopted them, every column the
// migrations declare is there, and rows land in the partitions.
func TestPartitionedLayoutIsPartitioned(t *testing.T) {
	t.Parallel()
	e := setupPartitioned(t)
	var parents []string
	require.NoError(t, e.db.Raw(`SELECT c.relname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() ORDER BY 1`).Scan(&parents).Error)
	require.Equal(t, []string{"kubun_connector_operation", "kubun_connector_pending_auth", "kubun_connector_projection_watch",
		"kubun_connector_sweep_candidate", "kubun_connector_sweep_checkpoint", "kubun_connector_sweep_receipt",
		"kubun_connector_sync_state"}, parents)
	for _, m := range models.All() {
		require.NoError(t, e.db.Migrator().AutoMigrate(m), "AutoMigrate finds nothing to add") // adds nothing on a full schema
	}
	for i := range 8 {
		recordOp(t, e, "caller-"+string(rune('a'+i)), "op")
	}
	var spread int
	require.NoError(t, e.db.Raw(`SELECT COUNT(DISTINCT tableoid) FROM kubun_connector_operation`).Scan(&spread).Error)
	require.Greater(t, spread, 1, "the rows are spread over partitions")
}

// TestRetentionPartitionedSameRowIDs: on a partitioned journal every
// partition numbers its rows from the same physical ids. A pass that
// picked the rows to delete (or hold) by physical id alone deleted, in
// every other partition, the rows that happened to share those ids: here
// the newest commit of a document, which the keep rules keep.
func TestRetentionPartitionedSameRowIDs(t *testing.T) {
	t.Parallel()
	e := setupPartitioned(t)
	// Callers chosen so that "old" and "new" share a partition and "kept"
	// lives in another one, where it is the first row (same physical id as
	// "old").
	var callerA, callerB string
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}, {"a", "d"}, {"a", "e"}, {"a", "f"}, {"a", "g"}} {
		var same bool
		require.NoError(t, e.db.Raw(`SELECT satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 0, ?::text)
			= satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 0, ?::text)
			AND satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 1, ?::text)
			= satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 1, ?::text)
			AND satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 2, ?::text)
			= satisfies_hash_partition('kubun_connector_operation'::regclass, 4, 2, ?::text)`,
			pair[0], pair[1], pair[0], pair[1], pair[0], pair[1]).Scan(&same).Error)
		if !same {
			callerA, callerB = pair[0], pair[1]
			break
		}
	}
	require.NotEmpty(t, callerB, "two callers in different partitions")
	seedOps(t, e, []models.Operation{
		docRow("old", models.OperationCommitted, callerA, "owner", "doc-1", 1, 1),
		docRow("kept", models.OperationCommitted, callerB, "owner-b", "doc-2", 1, 1),
	})
	seedOps(t, e, []models.Operation{docRow("new", models.OperationCommitted, callerA, "owner", "doc-1", 2, 2)})
	var ids []string
	require.NoError(t, e.db.Raw(`SELECT ctid::text FROM kubun_connector_operation WHERE operation_id IN ('old', 'kept')`).Scan(&ids).Error)
	require.Len(t, ids, 2)
	require.Equal(t, ids[0], ids[1], "the two rows share a physical id")

	require.Equal(t, int64(1), passWith(t, e, e.repo, ""))
	require.False(t, stored(t, e, "old"), "superseded on its document")
	require.True(t, stored(t, e, "kept"), "the newest row of its document is kept")
	require.True(t, stored(t, e, "new"))
	requireNoHeldCollectable(t, e)
}
