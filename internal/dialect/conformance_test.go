package dialect_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// dialectCase is one of internal/dialect's renderings run against a real
// database: what the repository's statements rely on it for.
type dialectCase struct {
	name string
	run  func(t *testing.T, e *dbtest.Env, d dialect.Dialect)
}

// dialectCases are the conformance cases every database leg runs.
var dialectCases = []dialectCase{
	{"many rows are read back as a table, typed, bounded by their count, every string as it was", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		type row struct {
			A *string
			B int64
			C bool
		}
		// What a JSON string (or an array literal) could misread: quotes,
		// backslashes, braces, commas, blanks, the word NULL, nothing.
		texts := []string{`x"y`, `back\slash`, `{a,b}`, " spaced ", "NULL", "", "é\u2028"}
		var in [][]any
		var want []row
		for i, s := range texts {
			in = append(in, []any{s, int64(i), i%2 == 0})
			want = append(want, row{A: &s, B: int64(i), C: i%2 == 0})
		}
		in = append(in, []any{nil, int64(len(texts)), false})
		want = append(want, row{B: int64(len(texts))})
		src, vars, err := jsonrows.Table(d.Name(), "v", []jsonrows.Col{jsonrows.Typed("a"), jsonrows.Typed("b"), jsonrows.Typed("c")}, in)
		require.NoError(t, err)
		var got []row
		require.NoError(t, e.DB.Raw("SELECT a, b, c FROM "+src+" ORDER BY b", vars...).Scan(&got).Error)
		require.Equal(t, want, got)
	}},
	{"the database clock is the host's within a few seconds", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		var now int64
		require.NoError(t, e.DB.Raw("SELECT "+d.NowMillis()).Scan(&now).Error)
		require.InDelta(t, time.Now().UnixMilli(), now, 5000)
	}},
	{"locked reads run and return their rows", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		seedDialectOps(t, e, 3)
		require.NoError(t, e.DB.Transaction(func(tx *gorm.DB) error {
			var ops []models.Operation
			require.NoError(t, d.LockRows(tx.Where("owner_did = ?", "dialect"), false, true).Find(&ops).Error)
			require.Len(t, ops, 3)
			require.NoError(t, d.LockRows(tx.Where("owner_did = ?", "dialect"), true, false).Find(&ops).Error)
			require.Len(t, ops, 3)
			return nil
		}))
	}},
	{"a fixed limit is a number in the text, and limits the rows", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		seedDialectOps(t, e, 3)
		var ops []models.Operation
		q := d.FixedLimit(e.DB.Where("owner_did = ?", "dialect").Order("operation_id"), 2)
		sql := q.Session(&gorm.Session{DryRun: true}).Find(&ops).Statement.SQL.String()
		require.Contains(t, sql, "LIMIT 2", "the limit is written as a number, not sent as a parameter")
		require.NoError(t, q.Find(&ops).Error)
		require.Len(t, ops, 2)
		// The last limit set wins, as with gorm's own.
		require.NoError(t, d.FixedLimit(e.DB.Where("owner_did = ?", "dialect"), 2).Limit(1).Find(&ops).Error)
		require.Len(t, ops, 1)
		require.NoError(t, d.FixedLimit(e.DB.Where("owner_did = ?", "dialect").Limit(1), 3).Find(&ops).Error)
		require.Len(t, ops, 3)
	}},
	{"a named index serves the rows retention has to judge", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		seedDialectOps(t, e, 3)
		var n int64
		q := d.ReadIndex(e.DB.Model(&models.RetentionPending{}), "kubun_connector_retention_pending",
			"kubun_connector_retention_pending_owner_idx")
		require.NoError(t, q.Where("owner_did = ? AND updated_at < ?", "dialect", int64(1)<<60).Count(&n).Error)
		require.Equal(t, int64(3), n, "the finished rows entered the table")
	}},
	{"the pass lock says whether the journal spans heaps", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		require.NoError(t, e.DB.Transaction(func(tx *gorm.DB) error {
			partitioned, err := d.XactLockPartitioned(tx, 0x636f6e66, "kubun_connector_operation")
			require.NoError(t, err)
			require.Equal(t, e.Leg.Partitioned, partitioned)
			return d.XactLock(tx, 0x636f6e66, "key")
		}))
	}},
	{"plan settings hold inside and are put back", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		require.NoError(t, e.DB.Transaction(func(tx *gorm.DB) error {
			ran := false
			err := d.WithPlanSettings(tx, []dialect.Setting{{Name: "enable_sort", Value: "off"}}, true, func() error {
				ran = true
				if d.Name() == "postgres" {
					require.Equal(t, "off", setting(t, tx, "enable_sort"))
				}
				return nil
			})
			require.NoError(t, err)
			require.True(t, ran)
			if d.Name() == "postgres" {
				require.Equal(t, "on", setting(t, tx, "enable_sort"), "put back for the rest of the caller's transaction")
			}
			return nil
		}))
	}},
	{"picked rows are the rows a statement changes", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		seedDialectOps(t, e, 5)
		partitioned := false
		require.NoError(t, e.DB.Transaction(func(tx *gorm.DB) error {
			var err error
			partitioned, err = d.XactLockPartitioned(tx, 0x636f6e66, "kubun_connector_operation")
			return err
		}))
		sel := func(columns string) *gorm.DB {
			return e.DB.Table("(?) AS o", e.DB.Model(&models.Operation{}).Select("caller_did, operation_id"+d.RowIDColumns("")).
				Where("owner_did = ?", "dialect").Order("operation_id").Limit(2)).Select(columns)
		}
		cond, vars := d.PickRows(partitioned, "caller_did, operation_id", sel)
		res := e.DB.Model(&models.Operation{}).Where(cond, vars...).UpdateColumn("last_kind", "picked")
		require.NoError(t, res.Error)
		require.Equal(t, int64(2), res.RowsAffected)
		var picked []string
		require.NoError(t, e.DB.Model(&models.Operation{}).Where("last_kind = ?", "picked").Order("operation_id").
			Pluck("operation_id", &picked).Error)
		require.Equal(t, []string{"d0", "d1"}, picked)
	}},
	{"only PostgreSQL announces recorded operations", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		require.Equal(t, e.Leg.Kind == dbtest.Postgres, d.Listens())
	}},
	{"a safely opened handle passes the pool check", func(t *testing.T, e *dbtest.Env, d dialect.Dialect) {
		problem, err := d.UnsafePool(e.DB)
		require.NoError(t, err)
		require.Empty(t, problem)
	}},
}

// TestDialectConformance runs every dialect case on every database leg
// (dbtest.All: PostgreSQL, SQLite through sqliteconn, SQLite through a
// plain DSN, partitioned PostgreSQL), and the pool check on SQLite opened
// through a plain DSN with and without the settings that make it safe.
func TestDialectConformance(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, dbtest.All(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		d, err := dialect.Of(e.DB)
		require.NoError(t, err)
		for _, c := range dialectCases {
			t.Run(c.name, func(t *testing.T) {
				_ = e.DB.Where("owner_did = ?", "dialect").Delete(&models.Operation{}).Error
				c.run(t, e, d)
			})
		}
	})
	t.Run("sqlite-plain-dsn", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "plain.db")
		for _, tc := range []struct {
			dsn    string
			unsafe bool
		}{
			{"file:" + path, true},
			{dbtest.SQLiteDSN(path), false},
		} {
			db := dbtest.Open(t, dbtest.PlainLite, tc.dsn)
			d, err := dialect.Of(db)
			require.NoError(t, err)
			problem, err := d.UnsafePool(db)
			require.NoError(t, err)
			require.Equal(t, tc.unsafe, problem != "", "%s: %q", tc.dsn, problem)
		}
	})
}

// seedDialectOps records n finished operations of owner "dialect" (c0/d0,
// c1/d1, …).
func seedDialectOps(t *testing.T, e *dbtest.Env, n int) {
	t.Helper()
	for i := range n {
		row := dbtest.OpRow(i, models.OperationCommitted, nil, 1)
		// Callers differ, so on the partitioned leg the rows spread over
		// partitions, where their physical ids repeat.
		row.CallerDID, row.OperationID, row.OwnerDID = fmt.Sprintf("c%d", i), fmt.Sprintf("d%d", i), "dialect"
		require.NoError(t, hooks.SkipLock(e.DB).Create(&row).Error)
	}
}

// setting reads a planner setting in tx.
func setting(t *testing.T, tx *gorm.DB, name string) string {
	t.Helper()
	var v string
	require.NoError(t, tx.Raw("SELECT current_setting(?)", name).Scan(&v).Error)
	return v
}
