package integrationtest

import (
	"strings"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// ddl keeps the schema-changing statements among stmts (a SQLite table
// rebuild shows as CREATE, INSERT … SELECT, DROP and ALTER … RENAME).
func ddl(stmts []string) []string {
	var out []string
	for _, s := range stmts {
		switch strings.ToUpper(strings.Fields(s + " x")[0]) {
		case "CREATE", "ALTER", "DROP", "INSERT":
			out = append(out, s)
		}
	}
	return out
}

// catalog is every column (name, type, nullability, default) and index
// definition of the connstore tables, as the database reports them.
func catalog(t *testing.T, e *env) []string {
	t.Helper()
	var rows []string
	q := `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
			COALESCE(column_default, '-') FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name LIKE 'kubun_connector_%'
		UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()
			AND tablename LIKE 'kubun_connector_%' ORDER BY 1`
	if e.kind == sqlitekind {
		q = `SELECT type || ' ' || name || ' ' || COALESCE(sql, '-') FROM sqlite_master
			WHERE tbl_name LIKE 'kubun_connector_%' ORDER BY 1`
	}
	require.NoError(t, e.db.Raw(q).Scan(&rows).Error)
	require.NotEmpty(t, rows)
	return rows
}

// TestAutoMigrateAfterMigrateIssuesNoDDL: the models' tags declare the
// columns, types, defaults and nullability the migrations create, so
// AutoMigrate on top issues no DDL and the catalog is unchanged.
func TestAutoMigrateAfterMigrateIssuesNoDDL(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		before := catalog(t, e)
		rec := newSQLRecorder()
		require.NoError(t, e.db.Session(&gorm.Session{Logger: rec}).AutoMigrate(models.All()...))
		require.Empty(t, ddl(rec.take()))
		require.Equal(t, before, catalog(t, e))
	})
}
