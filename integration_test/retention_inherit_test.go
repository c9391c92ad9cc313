package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestRetentionInheritanceChildSharesRowID: a journal partitioned the
// pre-declarative way (child tables INHERITing kubun_connector_operation,
// relkind 'r') was not detected as partitioned, so the pass picked rows by
// ctid alone. DELETE FROM the parent reaches the children, where the rows
// sharing the picked physical ids were deleted too: here an attempted (not
// even finished) operation, which retention must never collect.
func TestRetentionInheritanceChildSharesRowID(t *testing.T) {
	t.Parallel()
	// The child's row: unfinished (the re-check alone refuses it), or the
	// newest commit of its document (only the (table, id) pick protects it).
	for _, child := range []string{models.OperationAttempted, models.OperationCommitted} {
		t.Run(child, func(t *testing.T) {
			t.Parallel()
			e := setup(t, pgKind)
			require.NoError(t, e.db.Exec(`CREATE TABLE kubun_connector_operation_child () INHERITS (kubun_connector_operation)`).Error)
			seedOps(t, e, []models.Operation{
				docRow("old", models.OperationCommitted, "caller", "owner", "doc-1", 1, 1),
				docRow("new", models.OperationCommitted, "caller", "owner", "doc-1", 2, 2),
				docRow("pending", child, "other", "owner-2", "doc-2", 1, 1),
			})
			// Move "pending" into the child table, where it is the first row.
			require.NoError(t, e.db.Exec(`WITH m AS (DELETE FROM ONLY kubun_connector_operation WHERE operation_id = 'pending' RETURNING *)
				INSERT INTO kubun_connector_operation_child SELECT * FROM m`).Error)
			var tids []string
			require.NoError(t, e.db.Raw(`SELECT ctid::text FROM kubun_connector_operation WHERE operation_id IN ('old', 'pending')`).Scan(&tids).Error)
			require.Len(t, tids, 2)
			require.Equal(t, tids[0], tids[1], "the two rows share a physical id")
			require.True(t, stored(t, e, "pending"))

			passWith(t, e, e.repo, "")
			require.False(t, stored(t, e, "old"), "superseded on its document")
			require.True(t, stored(t, e, "new"))
			require.True(t, stored(t, e, "pending"), "the child table's row is kept: %s", child)
		})
	}
}
