package dbtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"gorm.io/gorm"
)

// Env is one test's migrated database with the lock plugin installed and
// a repository on it.
type Env struct {
	Leg Leg
	// DSN is the database's, for a second handle on it (Open).
	DSN  string
	DB   *gorm.DB
	Repo *repository.Repository
}

// Options shapes Setup.
type Options struct {
	// NewID is the plugin's id source (incarnations); nil is its default.
	NewID func() string
	// Repository is passed to repository.New.
	Repository repository.Options
}

// Setup makes a fresh database of leg (the tables created partitioned on
// the partitioned leg), installs the lock plugin, migrates it and makes a
// repository on it.
func Setup(t testing.TB, leg Leg, opts Options) *Env {
	t.Helper()
	return SetupAt(t, leg, NewDSN(t, leg), opts)
}

// SetupAt is Setup on the empty database at dsn, one a test made for a
// setting of its own (a locale, an encoding, a pooler in front).
func SetupAt(t testing.TB, leg Leg, dsn string, opts Options) *Env {
	t.Helper()
	db := Open(t, leg, dsn)
	if leg.Partitioned {
		layout, err := migrations.PartitionedLayout(4)
		if err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		for _, stmt := range layout {
			if err := db.Exec(stmt).Error; err != nil {
				t.Fatalf("dbtest: partitioned layout: %v", err)
			}
		}
	}
	repo, err := Install(context.Background(), db, opts.NewID, opts.Repository)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return &Env{Leg: leg, DSN: dsn, DB: db, Repo: repo}
}

// Install is what every store the project opens for a test, an example or
// the bench gets: the lock plugin on db (incarnations from newID; nil is
// the plugin's default), the migrations, and a repository with opts.
func Install(ctx context.Context, db *gorm.DB, newID func() string, opts repository.Options) (*repository.Repository, error) {
	if err := db.Use(hooks.New(hooks.Config{NewIDFunc: newID})); err != nil {
		return nil, fmt.Errorf("install the lock plugin: %w", err)
	}
	if err := migrations.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return repository.New(db, opts)
}
