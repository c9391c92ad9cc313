package dbtest

import (
	"context"
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
	// Before runs on the empty database before the plugin and migrations.
	Before func(*gorm.DB)
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
	dsn := NewDSN(t, leg)
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
	if opts.Before != nil {
		opts.Before(db)
	}
	if err := db.Use(hooks.New(hooks.Config{NewIDFunc: opts.NewID})); err != nil {
		t.Fatalf("dbtest: lock plugin: %v", err)
	}
	if err := migrations.Migrate(context.Background(), db); err != nil {
		t.Fatalf("dbtest: migrate: %v", err)
	}
	repo, err := repository.New(db, opts.Repository)
	if err != nil {
		t.Fatalf("dbtest: repository: %v", err)
	}
	return &Env{Leg: leg, DSN: dsn, DB: db, Repo: repo}
}
