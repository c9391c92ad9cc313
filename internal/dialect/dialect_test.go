package dialect

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	pgdriver "gorm.io/driver/postgres"
	sqlitedriver "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

type row struct {
	ID    int
	State string
}

func (row) TableName() string { return "t" }

// dryRun opens a handle of each dialect that renders statements without a
// server (PostgreSQL's pool connects lazily; nothing is sent).
func dryRun(t *testing.T) map[string]*gorm.DB {
	t.Helper()
	// One config each: gorm.Open keeps its dialector in the config.
	cfg := func() *gorm.Config {
		return &gorm.Config{DryRun: true, Logger: logger.Discard, DisableAutomaticPing: true}
	}
	pg, err := gorm.Open(pgdriver.Open("postgres://nobody@127.0.0.1:1/none?sslmode=disable"), cfg())
	require.NoError(t, err)
	lite, err := gorm.Open(sqlitedriver.Open(filepath.Join(t.TempDir(), "d.db")), cfg())
	require.NoError(t, err)
	return map[string]*gorm.DB{"postgres": pg, "sqlite": lite}
}

func TestStatementsPerDialect(t *testing.T) {
	for name, db := range dryRun(t) {
		d, err := Of(db)
		require.NoError(t, err)
		require.Equal(t, name, d.Name())
		q := d.ReadIndex(d.LockRows(db.Model(&row{}).Where("state = ?", "x"), false, true), "t", "t_idx")
		stmt := q.Find(&[]row{}).Statement
		sql := stmt.SQL.String()
		switch name {
		case "postgres":
			require.Equal(t, `SELECT * FROM "t" WHERE state = $1 FOR UPDATE SKIP LOCKED`, sql)
			require.True(t, d.Listens())
			require.Equal(t, ", tableoid, ctid", d.RowIDColumns(""))
			require.Equal(t, ", j.tableoid AS tableoid, j.ctid AS ctid", d.RowIDColumns("j"))
		case "sqlite":
			require.Equal(t, "SELECT * FROM t INDEXED BY t_idx WHERE state = ?", sql)
			require.False(t, d.Listens())
			require.Empty(t, d.RowIDColumns(""))
			require.Empty(t, d.RowIDColumns("j"))
		}
		require.NotEmpty(t, d.NowMillis())
	}
}

func TestPickRows(t *testing.T) {
	sel := func(columns string) *gorm.DB { return nil }
	var picked []string
	record := func(columns string) *gorm.DB { picked = append(picked, columns); return sel(columns) }
	cond, vars := sqlite{}.PickRows(false, "caller_did, operation_id", record)
	require.Equal(t, "(caller_did, operation_id) IN (?)", cond)
	require.Len(t, vars, 1)
	require.Equal(t, []string{"o.caller_did, o.operation_id"}, picked)

	picked = nil
	cond, _ = postgres{}.PickRows(false, "caller_did, operation_id", record)
	require.Equal(t, "ctid = ANY(ARRAY(?))", cond)
	require.Equal(t, []string{"o.ctid"}, picked)

	picked = nil
	cond, vars = postgres{}.PickRows(true, "caller_did, operation_id", record)
	require.Equal(t, "ctid = ANY(ARRAY(?)) AND (tableoid, ctid) IN (?)", cond, "ids repeat per partition")
	require.Len(t, vars, 2)
	require.Equal(t, []string{"o.ctid", "o.tableoid, o.ctid"}, picked)
}
