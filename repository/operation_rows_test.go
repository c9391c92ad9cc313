package repository

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"
)

// TestOperationScannerCoversEveryColumn: every column of models.Operation
// has a scan destination, and a column without one fails New (through
// newOperationScanner) instead of being dropped from what writes return.
func TestOperationScannerCoversEveryColumn(t *testing.T) {
	s, err := schema.Parse(&models.Operation{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	var ret clause.Returning
	for _, name := range s.DBNames {
		ret.Columns = append(ret.Columns, clause.Column{Name: name})
	}
	scanner, err := newOperationScanner(ret)
	require.NoError(t, err)
	require.Len(t, scanner.dests, len(operationColumns), "no destination for a column the model lacks")

	_, err = newOperationScanner(clause.Returning{Columns: append(ret.Columns, clause.Column{Name: "added_later"})})
	require.ErrorContains(t, err, `"added_later"`)
}

// BenchmarkScanOperations: a 1,000-row UPDATE … RETURNING of operations read
// by gorm's own scan and by updateOperations, on SQLite and, with
// CONNSTORE_TEST_PG_DSN set, on PostgreSQL.
func BenchmarkScanOperations(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			r := benchRepository(b, kind)
			now := int64(1)
			rows := make([]models.Operation, 1000)
			for i := range rows {
				id := fmt.Sprintf("op-%07d", i)
				rows[i] = models.Operation{CallerDID: "caller", OperationID: id, NodeKey: "n", OwnerDID: "owner",
					ConnectorName: "crm", Model: "m", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: id,
					PayloadHash: "h", ReissueIntent: models.JSON(`{}`), State: models.OperationAttempted, NextAttemptAt: &now,
					CreatedAt: now, UpdatedAt: now}
			}
			require.NoError(b, r.db.CreateInBatches(rows, 500).Error)
			set := func() map[string]any { return map[string]any{"attempts": gorm.Expr("attempts + 1")} }
			b.Run("gorm", func(b *testing.B) {
				for b.Loop() {
					var out []models.Operation
					require.NoError(b, r.conn(context.Background()).Model(&out).Clauses(r.returnOps).
						Where("state = ?", models.OperationAttempted).Updates(set()).Error)
					require.Len(b, out, 1000)
				}
			})
			b.Run("connstore", func(b *testing.B) {
				for b.Loop() {
					out, err := r.updateOperations(r.conn(context.Background()).Where("state = ?", models.OperationAttempted), set())
					require.NoError(b, err)
					require.Len(b, out, 1000)
				}
			})
		})
	}
}

// benchRepository is a migrated repository on a temporary SQLite file, or
// in a fresh PostgreSQL schema (skipped without CONNSTORE_TEST_PG_DSN).
func benchRepository(b *testing.B, kind string) *Repository {
	var db *gorm.DB
	var err error
	if kind == "sqlite" {
		db, err = sqliteconn.Open(filepath.Join(b.TempDir(), "bench.db"), sqliteconn.Options{})
		require.NoError(b, err)
	} else {
		dsn := os.Getenv("CONNSTORE_TEST_PG_DSN")
		if dsn == "" {
			b.Skip("CONNSTORE_TEST_PG_DSN is not set")
		}
		schema := fmt.Sprintf("bench_scan_%d", time.Now().UnixNano())
		admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		require.NoError(b, err)
		require.NoError(b, admin.Exec("CREATE SCHEMA "+schema).Error)
		b.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
		u, err := url.Parse(dsn)
		require.NoError(b, err)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		db, err = gorm.Open(postgres.Open(u.String()), &gorm.Config{Logger: logger.Discard})
		require.NoError(b, err)
	}
	raw, err := db.DB()
	require.NoError(b, err)
	b.Cleanup(func() { raw.Close() })
	require.NoError(b, db.Use(hooks.New(hooks.Config{})))
	require.NoError(b, migrations.Migrate(context.Background(), db))
	r, err := New(db, Options{})
	require.NoError(b, err)
	return r
}
