package repository_test

import (
	"os"
	"path/filepath"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/repository"
	"gorm.io/gorm"
)

// newExample opens a fresh SQLite file with the plugin, the schema and a
// repository on a fixed clock (connstoretest's, so examples print the same
// every run); done removes it.
func newExample() (db *gorm.DB, repo *repository.Repository, clock *connstoretest.Clock, done func()) {
	dir, err := os.MkdirTemp("", "connstore-example")
	if err != nil {
		panic(err)
	}
	s, err := connstoretest.OpenSQLite(filepath.Join(dir, "app.db"), connstoretest.Options{
		Clock: connstoretest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)),
		Repository: repository.Options{
			Backoff: &repository.ExponentialBackoff{Base: time.Minute, Max: time.Hour, MaxAttempts: 5}},
	})
	if err != nil {
		panic(err)
	}
	return s.DB, s.Repo, s.Clock, func() { _ = s.Close(); _ = os.RemoveAll(dir) }
}
