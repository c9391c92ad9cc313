package integrationtest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
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

// TestSQLiteOpenerMixedWorkload: 8 goroutines on two application
// instances (two handles on one database), each making a few hundred mixed
// calls — record, claim, commit, pending-auth save and consume, progress
// updates — get no error at all: on SQLite no "database is locked" or
// "busy", since the handle's writers queue for its write slot and the two
// handles' meet SQLite's lock only at BEGIN, where the wait is retried.
// TestSQLiteOpenerMixedWorkloadTenRuns repeats its SQLite leg ten times.
func TestSQLiteOpenerMixedWorkload(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, second := instance(t, e, repository.Options{})
		mixedWorkload(t, e, e.repo, second)
	})
}

// TestSQLiteOpenerMixedWorkloadTenRuns: the SQLite leg of the mixed
// workload ten times over, each on a fresh database: a lock error that
// shows once in a few runs fails the suite, not only a -count=10 run by
// hand.
func TestSQLiteOpenerMixedWorkloadTenRuns(t *testing.T) {
	t.Parallel()
	for run := range 10 {
		t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
			e := setup(t, sqlitekind)
			_, second := instance(t, e, repository.Options{})
			mixedWorkload(t, e, e.repo, second)
		})
	}
}

// TestSQLiteOpenerPrepareStmt: the same workload through handles opened
// with gorm's PrepareStmt: prepared statements pass through the write slot
// too.
func TestSQLiteOpenerPrepareStmt(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	var repos []*repository.Repository
	for range 2 {
		db, err := sqliteconn.Open(dbtest.SQLitePath(e.dsn), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard, PrepareStmt: true}})
		require.NoError(t, err)
		raw, err := db.DB()
		require.NoError(t, err)
		t.Cleanup(func() { _ = raw.Close() })
		require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
		repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		repos = append(repos, repo)
	}
	mixedWorkload(t, e, repos[0], repos[1])
}

// mixedWorkload runs 8 goroutines, alternating between repositories a and
// b, of 300 mixed calls each, and requires that none fails and nothing is
// lost.
func mixedWorkload(t *testing.T, e *env, a, b *repository.Repository) {
	t.Helper()
	repos := []*repository.Repository{a, b}
	require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, repository.SyncStateInput{
		LastSyncedAt: "t0", Status: models.SyncStatusSyncing}))
	const workers, rounds = 8, 60 // 5 calls a round: 300 calls a goroutine
	retries := 1 << 20
	errs := make(chan error, workers*rounds*5)
	var wg sync.WaitGroup
	for w := range workers {
		repo := repos[w%2]
		wg.Go(func() {
			c := context.Background()
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, _, err := repo.RecordOperation(c, opInput("caller", id)); err != nil {
					errs <- fmt.Errorf("record: %w", err)
				}
				claimed, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 2, LeaseFor: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("claim: %w", err)
				}
				for _, op := range claimed {
					if _, err := repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&op)}); err != nil {
						errs <- fmt.Errorf("commit: %w", err)
					}
				}
				if _, err := repo.SavePendingAuth(c, pendingInput(e, id)); err != nil {
					errs <- fmt.Errorf("save auth: %w", err)
				}
				if _, err := repo.ConsumePendingAuth(c, repository.ConsumeParams{State: id, OwnerDID: "owner", ConnectorName: "crm"}); err != nil {
					errs <- fmt.Errorf("consume auth: %w", err)
				}
				if err := repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: counterRecompute(nil), MaxRetries: &retries}); err != nil {
					errs <- fmt.Errorf("progress: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NotContains(t, err.Error(), "locked")
		require.NotContains(t, err.Error(), "busy")
		require.NoError(t, err)
	}
	require.Equal(t, int64(workers*rounds), count(t, e.db, &models.Operation{}))
	got, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"})
	require.NoError(t, err)
	require.Equal(t, int64(workers*rounds), got.EntityCount, "no progress update lost")
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
		"set sync state": func(c context.Context) error {
			return repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t))
		},
		"record receipt": func(c context.Context) error { _, err := repo.RecordRelistReceipt(c, receipt("p1"), nil); return err },
		"claim operations": func(c context.Context) error {
			_, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
			return err
		},
		"record operation": func(c context.Context) error {
			_, _, err := repo.RecordOperation(c, opInput("caller", "late"))
			return err
		},
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

// TestSQLitePlainDSNAccepted: a user's own pooled handle on
// sqliteconn.DSN passes repository.New and works, waiting in SQLite's busy
// handler instead of the write slot.
func TestSQLitePlainDSNAccepted(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, dbtest.PlainLite, sqliteconn.DSN(filepath.Join(t.TempDir(), "plain.db")))
	require.NoError(t, db.Use(hooks.New(hooks.Config{})))
	require.NoError(t, migrations.Migrate(context.Background(), db))
	repo, err := repository.New(db, repository.Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, _, errs[i] = repo.RecordOperation(context.Background(), opInput("caller", fmt.Sprint(i))) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	claimed, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 8)
}
