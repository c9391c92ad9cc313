package repository_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// exampleClock is a settable clock, so examples print the same every run.
type exampleClock struct{ t time.Time }

func (c *exampleClock) Now() time.Time          { return c.t }
func (c *exampleClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// newExample opens a fresh SQLite file with the plugin, the schema and a
// repository on a fixed clock; done removes it.
func newExample() (db *gorm.DB, repo *repository.Repository, clock *exampleClock, done func()) {
	dir, err := os.MkdirTemp("", "connstore-example")
	if err != nil {
		panic(err)
	}
	db, err = sqliteconn.Open(filepath.Join(dir, "app.db"), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	if err != nil {
		panic(err)
	}
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		panic(err)
	}
	if err := migrations.Migrate(context.Background(), db); err != nil {
		panic(err)
	}
	clock = &exampleClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	repo, err = repository.New(db, repository.Options{NowFunc: clock.Now,
		Backoff: &repository.ExponentialBackoff{Base: time.Minute, Max: time.Hour, MaxAttempts: 5}})
	if err != nil {
		panic(err)
	}
	raw, _ := db.DB()
	return db, repo, clock, func() { _ = raw.Close(); _ = os.RemoveAll(dir) }
}
