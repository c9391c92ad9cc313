package integrationtest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/connstore/connstore/migrations"
)

// Migration ids the upgrade tests roll back to, named so that a migration
// added later does not silently change what a test undoes.
const (
	mig0015 = "connstore_0015_lean_operation_indexes"
	mig0017 = "connstore_0017_retention_pending"
	mig0018 = "connstore_0018_retention_held"
	mig0019 = "connstore_0019_operation_seq"
)

// rollbackThrough rolls back every migration applied after id, and id itself,
// leaving the schema as the migration before id left it.
func rollbackThrough(t testing.TB, db *gorm.DB, id string) {
	t.Helper()
	ids := migrations.IDs()
	i := slices.Index(ids, id)
	require.GreaterOrEqual(t, i, 0, "unknown migration %s", id)
	for range len(ids) - i {
		require.NoError(t, migrations.RollbackLast(context.Background(), db))
	}
}
