package integrationtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

const (
	pgEnv      = "CONNSTORE_TEST_PG_DSN"
	pgKind     = "postgres"
	sqlitekind = "sqlite"
)

// env is one test's database, repository and injected clock and ids.
type env struct {
	kind string
	// partitioned is set on the PostgreSQL leg whose tables are
	// hash-partitioned (migrations.PartitionedLayout).
	partitioned bool
	dsn         string // the database's DSN, for a second handle on it
	db          *gorm.DB
	repo        *repository.Repository
	clock       *fakeClock
	ids         *seqIDs
}

// forEachDB runs fn as a parallel subtest on PostgreSQL and on SQLite, each
// with a freshly migrated database of its own.
//
// A third leg, postgres-partitioned, runs fn on PostgreSQL with every
// table hash-partitioned (migrations.PartitionedLayout): the README's
// partitioning recipe under every test that uses forEachDB.
func forEachDB(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, leg := range []string{pgKind, sqlitekind, partitionedLeg} {
		t.Run(leg, func(t *testing.T) {
			t.Parallel()
			if leg == partitionedLeg {
				fn(t, setupPartitioned(t))
				return
			}
			fn(t, setup(t, leg))
		})
	}
}

// partitionedLeg names forEachDB's partitioned PostgreSQL subtests.
const partitionedLeg = "postgres-partitioned"

func setup(t testing.TB, kind string) *env {
	t.Helper()
	return setupWith(t, kind, nil)
}

// setupPartitioned is setup on PostgreSQL with the tables created
// hash-partitioned before the migrations adopt them.
func setupPartitioned(t testing.TB) *env {
	t.Helper()
	e := setupWith(t, pgKind, func(db *gorm.DB) {
		layout, err := migrations.PartitionedLayout(4)
		require.NoError(t, err)
		for _, stmt := range layout {
			require.NoError(t, db.Exec(stmt).Error)
		}
	})
	e.partitioned = true
	return e
}

// setupWith is setup with before run on the empty database first.
func setupWith(t testing.TB, kind string, before func(*gorm.DB)) *env {
	t.Helper()
	dsn := newDSN(t, kind)
	db := openDSN(t, kind, dsn)
	if before != nil {
		before(db)
	}
	e := &env{kind: kind, dsn: dsn, db: db, clock: newFakeClock(), ids: connstoretest.NewIDs("id")}
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
	require.NoError(t, migrations.Migrate(context.Background(), db))
	repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
	require.NoError(t, err)
	e.repo = repo
	return e
}

// openBare opens an empty database of kind with no plugin and no schema.
func openBare(t testing.TB, kind string) *gorm.DB {
	t.Helper()
	return openDSN(t, kind, newDSN(t, kind))
}

// newDSN makes an empty database of kind (a schema on PostgreSQL, a file on
// SQLite) and returns its DSN.
func newDSN(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case pgKind:
		return pgSchemaDSN(t)
	case sqlitekind:
		return sqliteDSN(filepath.Join(t.TempDir(), "connstore.db"))
	}
	t.Fatalf("unknown database kind %q", kind)
	return ""
}

// openDSN opens a handle with no plugin on the database at dsn.
func openDSN(t testing.TB, kind, dsn string) *gorm.DB {
	t.Helper()
	var db *gorm.DB
	var err error
	if kind == pgKind {
		db, err = gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	} else {
		// SQLite is opened the way the README tells users to: through
		// sqliteconn, whose write slot the suite then exercises.
		db, err = sqliteconn.Open(sqlitePath(dsn), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	}
	return ownPool(t, db, err)
}

// ownPool sizes db's pool as the suite's handles are and closes it when
// the test ends; err is the open's.
func ownPool(t testing.TB, db *gorm.DB, err error) *gorm.DB {
	t.Helper()
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return db
}

// openPlainSQLite opens the SQLite database at dsn with the plain driver
// (no sqliteconn): a user's own handle, waiting in SQLite's busy handler.
func openPlainSQLite(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	return ownPool(t, db, err)
}

// sqlitePath is the file a DSN from sqliteDSN names.
func sqlitePath(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return path
}

// sqliteDSN is a WAL-mode file with a busy timeout and immediate write
// transactions, so concurrent writers wait instead of failing.
func sqliteDSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_busy_timeout=30000&_txlock=immediate&_foreign_keys=on"
}

// pgSchemaDSN creates a schema for this test and returns a DSN whose
// search_path selects it; the schema is dropped when the test ends. It is
// connstoretest's, so the suite and users' tests share one helper.
func pgSchemaDSN(t testing.TB) string {
	t.Helper()
	return connstoretest.SchemaDSN(t, "")
}

// pgDatabaseDSN creates a whole database for this test (dropped when it
// ends, connections and all) and returns its DSN.
func pgDatabaseDSN(t testing.TB) string {
	t.Helper()
	dsn := pgSchemaDSN(t) // skips, or fails under CI, without a server
	return newDatabase(t, os.Getenv(pgEnv), dsn, "d_")
}

// newDatabase creates a database named prefix + random hex through the
// server at adminDSN, drops it (connections and all) when the test ends, and
// returns dsn pointed at it, without a search_path.
func newDatabase(t testing.TB, adminDSN, dsn, prefix string, options ...string) string {
	t.Helper()
	admin, err := gorm.Open(postgres.Open(adminDSN), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err, "the server at %s is not reachable", adminDSN)
	adminDB, err := admin.DB()
	require.NoError(t, err)
	name := prefix + randomHex(8)
	require.NoError(t, admin.Exec(strings.Join(append([]string{"CREATE DATABASE", name}, options...), " ")).Error,
		"the server at %s is not reachable", adminDSN)
	t.Cleanup(func() {
		_ = admin.Exec("DROP DATABASE " + name + " WITH (FORCE)").Error
		_ = adminDB.Close()
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fakeClock and seqIDs are connstoretest's manual clock and id source,
// starting at 2026-01-01 UTC and "prefix-1".
type (
	fakeClock = connstoretest.Clock
	seqIDs    = connstoretest.IDs
)

func newFakeClock() *fakeClock {
	return connstoretest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// ctx is the test's context.
func ctx(t *testing.T) context.Context { return t.Context() }

// count returns the number of rows of model matching the optional where.
func count(t *testing.T, db *gorm.DB, model any, where ...any) int64 {
	t.Helper()
	var n int64
	q := db.Model(model)
	if len(where) > 0 {
		q = q.Where(where[0], where[1:]...)
	}
	require.NoError(t, q.Count(&n).Error)
	return n
}
