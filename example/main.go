// Command example runs connstore's flow end to end, telling what each step
// did and why, on an embedded SQLite file, or on PostgreSQL when -dsn (or
// CONNSTORE_DSN) names a server, as a URL or as key=value pairs:
//
//	go run ./example
//	go run ./example -dsn 'postgres://user@127.0.0.1:5432/db?sslmode=disable'
//	go run ./example -dsn 'port=5432 user=me dbname=db'
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("CONNSTORE_DSN"),
		"PostgreSQL DSN, a postgres:// URL or key=value pairs; empty uses the SQLite file -sqlite")
	file := flag.String("sqlite", defaultFile(), "SQLite file used when no DSN is given")
	dash := flag.String("dashboard", "127.0.0.1:0",
		"loopback address of the example's dashboard (port 0 picks a free one; empty for none)")
	keep := flag.Bool("serve", false, "keep serving the dashboard after the story, until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, config{dsn: *dsn, file: *file, dashboard: *dash, serve: *keep}); err != nil {
		stop()
		log.Fatal(err)
	}
}

// config is one run of the example.
type config struct {
	dsn, file string
	// dashboard is the address the example's dashboard listens on while
	// it runs ("" for none); serve keeps it serving after the story.
	dashboard string
	serve     bool
}

// defaultFile is where the example keeps its SQLite database: the user's
// cache directory (or the temporary directory), never the directory it is
// run from, so running it leaves nothing in a checkout.
func defaultFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "connstore")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "example.db")
}

// open opens PostgreSQL when dsn is set (any form pgx accepts; a malformed
// one is an error, never a silent fall-back to SQLite), else the SQLite file.
func open(dsn, file string) (*gorm.DB, string, error) {
	cfg := &gorm.Config{Logger: logger.Discard}
	if dsn != "" {
		pc, err := pgconn.ParseConfig(dsn)
		if err != nil {
			return nil, "", fmt.Errorf("-dsn is not a PostgreSQL DSN: %w", err)
		}
		db, err := gorm.Open(postgres.Open(dsn), cfg)
		return db, fmt.Sprintf("PostgreSQL at %s:%d, database %s", pc.Host, pc.Port, pc.Database), err
	}
	db, err := sqliteconn.Open(file, sqliteconn.Options{Config: cfg})
	return db, "SQLite file " + file + " (WAL, immediate write transactions)", err
}

func run(ctx context.Context, out io.Writer, cfg config) error {
	db, where, err := open(cfg.dsn, cfg.file)
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
	if cfg.dashboard != "" {
		stopDashboard, err := serveDashboard(ctx, out, repo, cfg.dashboard)
		if err != nil {
			return err
		}
		defer stopDashboard()
	}
	runID := strconv.FormatInt(time.Now().UnixNano(), 36) // keeps this run's rows apart from earlier runs'
	steps := []func(context.Context, io.Writer, *repository.Repository, string) error{
		syncProgress, operations, sweeps,
	}
	for _, step := range steps {
		if err := step(ctx, out, repo, runID); err != nil {
			return err
		}
	}
	if cfg.serve && cfg.dashboard != "" {
		fmt.Fprintln(out, "The story is told; the dashboard keeps serving until interrupted.")
		<-ctx.Done()
	}
	return nil
}
