package connstoretest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store is a migrated database with the lock plugin installed and a
// repository on it, on the manual clock and id source it was built with.
type Store struct {
	// DB is the handle, for the application's own models.
	DB *gorm.DB
	// Repo is the repository, on Clock and IDs.
	Repo *repository.Repository
	// Clock is the store's clock; Repo reads time only from it.
	Clock *Clock
	// IDs is the store's id source (lease tokens, incarnations).
	IDs *IDs
}

// Options shapes a Store; the zero value is a clock at 2026-01-01 UTC, ids
// "id-1", "id-2", …, gorm's logger silent, and repository defaults.
type Options struct {
	// Clock is the clock; nil means a new one at 2026-01-01 00:00 UTC.
	Clock *Clock
	// IDs is the id source; nil means NewIDs("id").
	IDs *IDs
	// Repository is passed to repository.New; its NowFunc and NewIDFunc
	// are replaced by Clock's and IDs'.
	Repository repository.Options
	// Gorm is the gorm configuration; nil means a silent logger.
	Gorm *gorm.Config
}

// PostgresEnv is the environment variable Postgres reads when given no DSN.
const PostgresEnv = dbtest.PostgresEnv

// SQLite returns a Store on a new SQLite file in t.TempDir(), opened with
// sqliteconn.Open.
func SQLite(t testing.TB, opts Options) *Store {
	t.Helper()
	opts = opts.withDefaults()
	db, err := sqliteconn.Open(filepath.Join(t.TempDir(), "connstore.db"), sqliteconn.Options{Config: opts.Gorm})
	if err != nil {
		t.Fatalf("connstoretest: %v", err)
	}
	return build(t, db, opts)
}

// Postgres returns a Store in a new schema of the PostgreSQL server at dsn
// (see SchemaDSN).
func Postgres(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	opts = opts.withDefaults()
	db, err := gorm.Open(postgres.Open(SchemaDSN(t, dsn)), opts.Gorm)
	if err != nil {
		t.Fatalf("connstoretest: %v", err)
	}
	return build(t, db, opts)
}

// SchemaDSN creates a schema on the PostgreSQL server at dsn (or, if dsn is
// empty, at $CONNSTORE_TEST_PG_DSN) and returns dsn with a search_path
// selecting it; the schema is dropped when the test ends. Without a DSN the
// test is skipped, or failed when CI=true, so a CI run never passes by
// skipping its database. (The project's own suite makes its schemas the
// same way.)
func SchemaDSN(t testing.TB, dsn string) string {
	t.Helper()
	return dbtest.SchemaDSN(t, dsn)
}

// NewSchema creates an empty schema named prefix and random hex on the
// PostgreSQL server at dsn (a URL), and returns its name and dsn with a
// search_path selecting it. It is SchemaDSN for a program without a
// testing.TB (a benchmark, a tool): the caller drops the schema
// (DropSchema) when done.
func NewSchema(ctx context.Context, dsn, prefix string) (name, schemaDSN string, err error) {
	return dbtest.NewSchema(ctx, dsn, prefix)
}

// DropSchema drops the schema name (from NewSchema) and everything in it.
func DropSchema(ctx context.Context, dsn, name string) error {
	return dbtest.DropSchema(ctx, dsn, name)
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if o.IDs == nil {
		o.IDs = NewIDs("id")
	}
	if o.Gorm == nil {
		o.Gorm = &gorm.Config{Logger: logger.Discard}
	}
	o.Repository.NowFunc = o.Clock.Now
	o.Repository.NewIDFunc = o.IDs.Next
	return o
}

// build installs the plugin, migrates and makes the repository; the handle
// is closed when the test ends.
func build(t testing.TB, db *gorm.DB, opts Options) *Store {
	t.Helper()
	raw, err := db.DB()
	if err != nil {
		t.Fatalf("connstoretest: %v", err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	s, err := assemble(db, opts)
	if err != nil {
		t.Fatalf("connstoretest: %v", err)
	}
	return s
}

// OpenSQLite is SQLite for code without a testing.TB (Examples, small
// programs): a Store on the SQLite file at path, created if missing. Close
// its handle when done (Store.Close).
func OpenSQLite(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	db, err := sqliteconn.Open(path, sqliteconn.Options{Config: opts.Gorm})
	if err != nil {
		return nil, fmt.Errorf("connstoretest: %w", err)
	}
	s, err := assemble(db, opts)
	if err != nil {
		if raw, rawErr := db.DB(); rawErr == nil {
			_ = raw.Close()
		}
		return nil, fmt.Errorf("connstoretest: %w", err)
	}
	return s, nil
}

// Close closes the store's handle.
func (s *Store) Close() error {
	raw, err := s.DB.DB()
	if err != nil {
		return err
	}
	return raw.Close()
}

// assemble installs the plugin, migrates and makes the repository.
func assemble(db *gorm.DB, opts Options) (*Store, error) {
	repo, err := dbtest.Install(context.Background(), db, opts.IDs.Next, opts.Repository)
	if err != nil {
		return nil, err
	}
	return &Store{DB: db, Repo: repo, Clock: opts.Clock, IDs: opts.IDs}, nil
}
