// Command example runs connstore's flow end to end on an embedded SQLite
// file, or on PostgreSQL when -dsn (or CONNSTORE_DSN) names one:
//
//	go run ./example
//	go run ./example -dsn 'postgres://user@127.0.0.1:5432/db?sslmode=disable'
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("CONNSTORE_DSN"),
		"PostgreSQL DSN (postgres://...); empty uses the SQLite file -sqlite")
	file := flag.String("sqlite", "connstore-example.db", "SQLite file used when no DSN is given")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *dsn, *file); err != nil {
		log.Fatal(err)
	}
}

func open(dsn, file string) (*gorm.DB, string, error) {
	cfg := &gorm.Config{Logger: logger.Discard}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || strings.Contains(dsn, "host=") {
		db, err := gorm.Open(postgres.Open(dsn), cfg)
		return db, "PostgreSQL", err
	}
	// WAL, a busy timeout and immediate write transactions let concurrent
	// writers wait for each other instead of failing with "database is locked".
	db, err := gorm.Open(sqlite.Open("file:"+file+"?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate"), cfg)
	return db, "SQLite file " + file, err
}

func run(ctx context.Context, out io.Writer, dsn, file string) error {
	db, where, err := open(dsn, file)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	// The three setup lines: plugin, migrations, repository.
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		return err
	}
	if err := migrations.Migrate(ctx, db); err != nil {
		return err
	}
	// A short backoff so the example's failed write is re-driven at once.
	repo, err := repository.New(db, repository.Options{Backoff: &repository.ExponentialBackoff{
		Base: 100 * time.Millisecond, Max: time.Minute, Jitter: 0.2, MaxAttempts: 5}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "connstore example on %s\n", where)
	steps := []func(context.Context, io.Writer, *repository.Repository) error{
		syncProgress,
		operations,
		sweeps,
	}
	for _, step := range steps {
		if err := step(ctx, out, repo); err != nil {
			return err
		}
	}
	return nil
}
