package integrationtest

import (
	"context"
	"testing"

	"github.com/connstore/connstore/migrations"
	"github.com/stretchr/testify/require"
)

// TestRollbackLeanIndexesAndByteOrderThenMigrate: rolling back every migration
// from 0015 (lean indexes, byte order and all after them) and migrating again leaves the schema as a straight migration
// did.
func TestRollbackLeanIndexesAndByteOrderThenMigrate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		before := catalog(t, e)
		idx := indexes(t, e.kind, e.db)
		c := context.Background()
		rollbackThrough(t, e.db, mig0015)
		require.NoError(t, migrations.Migrate(c, e.db))
		require.Equal(t, before, catalog(t, e))
		require.Equal(t, idx, indexes(t, e.kind, e.db))
		if e.kind == pgKind {
			require.Equal(t, []string{"caller_did:C", "connector_name:C", "document_id:C", "operation_id:C", "owner_did:C", "state:C"},
				journalCollations(t, e.db))
		}
	})
}
