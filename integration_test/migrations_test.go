package integrationtest

import (
	"context"
	"sync"
	"testing"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

func TestMigrateRerunRollback(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{pgKind, sqlitekind} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := openBare(t, kind)
			c := context.Background()
			require.NoError(t, migrations.Migrate(c, db))
			requireAllTables(t, db, true)
			require.Equal(t, int64(len(migrations.IDs())), count(t, db, &migrationRow{}))

			// Re-running is a no-op.
			require.NoError(t, migrations.Migrate(c, db))
			require.Equal(t, int64(len(migrations.IDs())), count(t, db, &migrationRow{}))

			for range migrations.IDs() {
				require.NoError(t, migrations.RollbackLast(c, db))
			}
			requireAllTables(t, db, false)
			require.ErrorIs(t, migrations.RollbackLast(c, db), migrations.ErrNothingToRollback)

			// And forward again from empty.
			require.NoError(t, migrations.Migrate(c, db))
			requireAllTables(t, db, true)
		})
	}
}

func TestMigrateConcurrentInstances(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{pgKind, sqlitekind} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := openBare(t, kind)
			var wg sync.WaitGroup
			errs := make([]error, 6)
			for i := range errs {
				wg.Go(func() { errs[i] = migrations.Migrate(context.Background(), db) })
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, int64(len(migrations.IDs())), count(t, db, &migrationRow{}))
			requireAllTables(t, db, true)
		})
	}
}

// TestModelsMatchSchema checks every model column exists in the migrated
// schema, so models and DDL cannot drift apart.
func TestModelsMatchSchema(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, m := range models.All() {
			s, err := schema.Parse(m, &sync.Map{}, e.db.NamingStrategy)
			require.NoError(t, err)
			cols, err := e.db.Migrator().ColumnTypes(m)
			require.NoError(t, err)
			have := map[string]bool{}
			for _, c := range cols {
				have[c.Name()] = true
			}
			require.Len(t, cols, len(s.DBNames), "table %s", s.Table)
			for _, name := range s.DBNames {
				require.True(t, have[name], "table %s lacks column %s", s.Table, name)
			}
		}
	})
}

type migrationRow struct{ ID string }

func (migrationRow) TableName() string { return migrations.TableName }

func requireAllTables(t *testing.T, db *gorm.DB, exist bool) {
	t.Helper()
	for _, m := range models.All() {
		require.Equal(t, exist, db.Migrator().HasTable(m), "table of %T", m)
	}
}
