package dbtest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/connstore/connstore/sqliteconn"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// NewDSN makes an empty database for leg (a schema on PostgreSQL, a file in
// t.TempDir() on SQLite) and returns its DSN.
func NewDSN(t testing.TB, leg Leg) string {
	t.Helper()
	if leg.Kind == Postgres {
		return SchemaDSN(t, "")
	}
	return SQLiteDSN(filepath.Join(t.TempDir(), "connstore.db"))
}

// Open opens a handle with no plugin on the database of leg at dsn; its
// pool is sized as the suite's handles are and closed when the test ends.
// SQLite is opened the way the README tells users to (sqliteconn), or for
// the Plain leg with the plain driver.
func Open(t testing.TB, leg Leg, dsn string) *gorm.DB {
	t.Helper()
	cfg := &gorm.Config{Logger: logger.Discard}
	var db *gorm.DB
	var err error
	switch {
	case leg.Kind == Postgres:
		db, err = gorm.Open(postgres.Open(dsn), cfg)
	case leg.Plain:
		db, err = gorm.Open(sqlite.Open(dsn), cfg)
	default:
		db, err = sqliteconn.Open(SQLitePath(dsn), sqliteconn.Options{Config: cfg})
	}
	return OwnPool(t, db, err)
}

// OwnPool sizes db's pool as the suite's handles are and closes it when
// the test ends; err is the open's (fatal when set).
func OwnPool(t testing.TB, db *gorm.DB, err error) *gorm.DB {
	t.Helper()
	if err != nil {
		t.Fatalf("dbtest: open: %v", err)
	}
	raw, err := db.DB()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	raw.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = raw.Close() })
	return db
}

// SQLiteDSN is a WAL-mode file with a busy timeout and immediate write
// transactions, so a plain handle's concurrent writers wait instead of
// failing.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_busy_timeout=30000&_txlock=immediate&_foreign_keys=on"
}

// SQLitePath is the file a DSN from SQLiteDSN names.
func SQLitePath(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return path
}
