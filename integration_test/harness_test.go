package integrationtest

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

const (
	pgEnv      = dbtest.PostgresEnv
	pgKind     = dbtest.Postgres
	sqlitekind = dbtest.SQLite
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

// forEachDB runs fn as a parallel subtest on each of the suite's legs
// (dbtest.Suite: PostgreSQL, SQLite through sqliteconn, and PostgreSQL with
// every table hash-partitioned, the README's partitioning recipe), each
// with a freshly migrated database of its own.
func forEachDB(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	forEachLeg(t, dbtest.Suite(), fn)
}

// forEachPG is forEachDB on the PostgreSQL legs only (plain and
// partitioned), for what only PostgreSQL has: row locks, planner settings.
func forEachPG(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	forEachLeg(t, slices.DeleteFunc(slices.Clone(dbtest.Suite()), func(l dbtest.Leg) bool { return l.Kind != pgKind }), fn)
}

func forEachLeg(t *testing.T, legs []dbtest.Leg, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, leg := range legs {
		t.Run(leg.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, setupLeg(t, leg))
		})
	}
}

// partitionedLeg names forEachDB's partitioned PostgreSQL subtests.
var partitionedLeg = dbtest.PGPartitioned.Name

func setup(t testing.TB, kind string) *env {
	t.Helper()
	return setupLeg(t, legOf(kind))
}

// setupPartitioned is setup on PostgreSQL with the tables created
// hash-partitioned before the migrations adopt them.
func setupPartitioned(t testing.TB) *env {
	t.Helper()
	return setupLeg(t, dbtest.PGPartitioned)
}

// setupLeg is a migrated database of leg (dbtest.Setup) on the test's own
// manual clock and id source.
func setupLeg(t testing.TB, leg dbtest.Leg) *env {
	t.Helper()
	return setupAt(t, leg, dbtest.NewDSN(t, leg))
}

// setupAt is setupLeg on the empty database at dsn (dbtest.SetupAt): one a
// test made with a locale, an encoding or a pooler of its own.
func setupAt(t testing.TB, leg dbtest.Leg, dsn string) *env {
	t.Helper()
	clock, ids := newFakeClock(), connstoretest.NewIDs("id")
	d := dbtest.SetupAt(t, leg, dsn, dbtest.Options{NewID: ids.Next,
		Repository: repository.Options{NowFunc: clock.Now, NewIDFunc: ids.Next}})
	return &env{kind: leg.Kind, partitioned: leg.Partitioned, dsn: d.DSN, db: d.DB, repo: d.Repo, clock: clock, ids: ids}
}

// legOf is the plain leg of a database kind.
func legOf(kind string) dbtest.Leg {
	if kind == pgKind {
		return dbtest.PG
	}
	return dbtest.Lite
}

// openBare opens an empty database of kind with no plugin and no schema.
func openBare(t testing.TB, kind string) *gorm.DB {
	t.Helper()
	return dbtest.Open(t, legOf(kind), dbtest.NewDSN(t, legOf(kind)))
}

// openDSN opens a handle with no plugin on the database at dsn (SQLite
// through sqliteconn, as the README tells users to).
func openDSN(t testing.TB, kind, dsn string) *gorm.DB {
	t.Helper()
	return dbtest.Open(t, legOf(kind), dsn)
}

// pgDatabaseDSN creates a whole database for this test (dropped when it
// ends, connections and all) and returns its DSN.
func pgDatabaseDSN(t testing.TB) string {
	t.Helper()
	dsn := dbtest.SchemaDSN(t, "") // skips, or fails under CI, without a server
	return dbtest.NewDatabase(t, os.Getenv(pgEnv), dsn, "d_")
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
