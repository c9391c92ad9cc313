package migrations_test

import (
	"path/filepath"
	"testing"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
)

func TestStatus(t *testing.T) {
	db, err := sqliteconn.Open(filepath.Join(t.TempDir(), "s.db"), sqliteconn.Options{})
	require.NoError(t, err)
	ids := migrations.IDs()

	list, unknown, err := migrations.Status(t.Context(), db)
	require.NoError(t, err)
	require.Empty(t, unknown)
	require.Len(t, list, len(ids))
	for _, m := range list {
		require.False(t, m.Applied, m.ID)
	}

	require.NoError(t, migrations.Migrate(t.Context(), db))
	require.NoError(t, migrations.RollbackLast(t.Context(), db))
	require.NoError(t, db.Exec("INSERT INTO "+migrations.TableName+" (id) VALUES ('9999_from_the_future')").Error)
	list, unknown, err = migrations.Status(t.Context(), db)
	require.NoError(t, err)
	require.Equal(t, []string{"9999_from_the_future"}, unknown)
	for i, m := range list {
		require.Equal(t, ids[i], m.ID)
		require.Equal(t, i < len(ids)-1, m.Applied, m.ID)
	}
}
