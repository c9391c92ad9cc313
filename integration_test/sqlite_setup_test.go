package integrationtest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// openerRepo opens a migrated SQLite file through sqliteconn.
func openerRepo(t *testing.T) (*gorm.DB, *repository.Repository) {
	t.Helper()
	db, err := sqliteconn.Open(filepath.Join(t.TempDir(), "app.db"), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	require.NoError(t, err)
	raw, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	require.NoError(t, db.Use(hooks.New(hooks.Config{})))
	require.NoError(t, migrations.Migrate(context.Background(), db))
	repo, err := repository.New(db, repository.Options{})
	require.NoError(t, err)
	return db, repo
}

// TestSQLiteOpenerConcurrentReceipts: 64 concurrent recorders on a handle
// from sqliteconn.Open all succeed.
func TestSQLiteOpenerConcurrentReceipts(t *testing.T) {
	t.Parallel()
	_, repo := openerRepo(t)
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = repo.RecordRelistReceipt(context.Background(), receipt(fmt.Sprintf("p%d", i)), cands("a", "b"))
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestSQLiteMisconfiguredRefused: New names what a pooled SQLite handle
// lacks and how to fix it; a single-connection pool is accepted as is.
func TestSQLiteMisconfiguredRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		query, want string
		single      bool
	}{
		{"_busy_timeout=5000&_txlock=immediate", "journal mode is delete", false},
		{"_journal_mode=WAL&_busy_timeout=0&_txlock=immediate", "no busy timeout", false},
		{"_journal_mode=WAL&_busy_timeout=5000", "begin deferred", false},
		{"", "", true},
	}
	for _, tc := range cases {
		db, err := gorm.Open(sqlite.Open("file:"+filepath.Join(t.TempDir(), "x.db")+"?"+tc.query), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		raw, err := db.DB()
		require.NoError(t, err)
		if tc.single {
			raw.SetMaxOpenConns(1)
		}
		require.NoError(t, db.Use(hooks.New(hooks.Config{})))
		_, err = repository.New(db, repository.Options{})
		if tc.want == "" {
			require.NoError(t, err, tc.query)
		} else {
			require.ErrorIs(t, err, repository.ErrUnsafeSQLite, tc.query)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "sqliteconn.Open")
		}
		_ = raw.Close()
	}
}

// TestSQLiteDeadlineWhileLocked: with the write lock held elsewhere, a call
// with a 300 ms deadline returns within twice that, with
// context.DeadlineExceeded, for an autocommit write and a transaction.
func TestSQLiteDeadlineWhileLocked(t *testing.T) {
	t.Parallel()
	db, repo := openerRepo(t)
	holder := db.Begin()
	require.NoError(t, holder.Error)
	defer holder.Rollback()
	require.NoError(t, holder.Exec("UPDATE kubun_connector_sync_state SET status = status").Error)

	calls := map[string]func(context.Context) error{
		"set sync state": func(c context.Context) error { return repo.SetSyncState(c, "crm", "o", baseState(t)) },
		"record receipt": func(c context.Context) error { _, err := repo.RecordRelistReceipt(c, receipt("p1"), nil); return err },
	}
	for name, call := range calls {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err := call(c)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.Less(t, time.Since(start), 600*time.Millisecond, name)
	}
}
