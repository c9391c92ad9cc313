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

// indexes lists every connstore index as name:columns.
func indexes(t *testing.T, kind string, db *gorm.DB) []string {
	t.Helper()
	q := `SELECT indexname || ':' || substring(indexdef from '\((.*)\)') FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename LIKE 'kubun_connector_%'
			AND tablename <> 'kubun_connector_migrations'
			AND NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = schemaname AND c.relname = tablename AND c.relispartition) ORDER BY 1`
	if kind == sqlitekind {
		q = `SELECT m.name || ':' || (SELECT group_concat(COALESCE(name, '(expression)'), ', ') FROM
				(SELECT name FROM pragma_index_info(m.name) ORDER BY seqno))
			FROM sqlite_master m WHERE m.type = 'index' AND m.tbl_name LIKE 'kubun_connector_%'
				AND m.name NOT LIKE 'sqlite_autoindex%' ORDER BY 1`
	}
	var rows []string
	require.NoError(t, db.Raw(q).Scan(&rows).Error)
	return rows
}

// TestAutoMigrateAloneBuildsTheIndexes: the tags declare every index the
// migrations create, by name and column order.
func TestAutoMigrateAloneBuildsTheIndexes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		bare := openBare(t, e.kind)
		require.NoError(t, bare.AutoMigrate(models.All()...))
		want := indexes(t, e.kind, e.db)
		// 20 secondary indexes, and on PostgreSQL the 13 primary keys too.
		wantLen := map[string]int{pgKind: 33, sqlitekind: 20}[e.kind]
		require.Len(t, want, wantLen, "every index of the migrations")
		require.Equal(t, want, indexes(t, e.kind, bare))
	})
}
