package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/internal/dbtest"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// pgbouncerEnv names a PgBouncer in transaction pooling in front of a
// PostgreSQL server (scripts/test.sh starts one). It must forward any
// database name to the server (a "*" entry): each test makes a database of
// its own, because a search_path in the DSN is a startup parameter
// PgBouncer refuses (see the search_path subtest).
const pgbouncerEnv = "CONNSTORE_TEST_PGBOUNCER_DSN"

// pgbouncerDSN returns the PgBouncer DSN; it skips without one, and fails
// under CI, where the PgBouncer tests must run.
func pgbouncerDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(pgbouncerEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: the PgBouncer tests cannot be skipped under CI", pgbouncerEnv)
		}
		t.Skipf("%s is not set; skipping PgBouncer", pgbouncerEnv)
	}
	return dsn
}

// withExecMode sets pgx's default_query_exec_mode on dsn; "" leaves pgx's
// default (cache_statement).
func withExecMode(t testing.TB, dsn, mode string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Del("default_query_exec_mode")
	if mode != "" {
		q.Set("default_query_exec_mode", mode)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// bouncedDatabase creates a database of its own for this test, through the
// PgBouncer at dsn, and returns the DSN reaching it through PgBouncer (with
// pgx's default exec mode unless dsn names one). A fresh database is also a
// fresh PgBouncer pool: no other test's server connections are in it. The
// database is dropped, connections and all, when the test ends.
func bouncedDatabase(t *testing.T, dsn string) string {
	t.Helper()
	return dbtest.NewDatabase(t, withExecMode(t, dsn, "exec"), dsn, "b_")
}

// TestPgBouncerTransactionPooling runs the repository behind PgBouncer in
// transaction pooling, where consecutive transactions of one client
// connection may run on different server connections, and shows what breaks
// there: named prepared statements, pgx's default statement cache among
// them, and a search_path given as a startup parameter.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	base := pgbouncerDSN(t)

	// Migrations, the plugin and every kind of repository write, from 12
	// goroutines through two repositories (two processes' progress caches),
	// with pgx in exec mode (README, "Behind PgBouncer"): zero errors, and
	// each shared sync-state row's version and count equal the acknowledged
	// compare-and-swap writes.
	t.Run("workload with default_query_exec_mode=exec", func(t *testing.T) {
		runBouncedWorkload(t, withExecMode(t, bouncedDatabase(t, base), "exec"))
	})
	t.Run("workload with default_query_exec_mode=simple_protocol", func(t *testing.T) {
		runBouncedWorkload(t, withExecMode(t, bouncedDatabase(t, base), "simple_protocol"))
	})

	// pgx's default mode, cache_statement, prepares every statement under a
	// name derived from its text, on whichever server connection PgBouncer
	// lent the client. A second client running the same statement is lent
	// the same server connection (a fresh pool holds one) and its prepare
	// collides: 42P05. Under load the same cache also meets a server
	// connection that lacks a statement it prepared elsewhere (26000).
	t.Run("pgx cache_statement collides", func(t *testing.T) {
		dsn := bouncedDatabase(t, base)
		const q = "SELECT $1::int + 1"
		first, second := pgxConn(t, dsn), pgxConn(t, dsn)
		var n int
		require.NoError(t, first.QueryRow(ctx(t), q, 1).Scan(&n))
		err := second.QueryRow(ctx(t), q, 1).Scan(&n)
		requirePgCode(t, err, "42P05", "prepared statement \"stmtcache_")

		// Two clients in exec mode share that server connection: they name
		// no statement on it.
		dsn = withExecMode(t, dsn, "exec")
		first, second = pgxConn(t, dsn), pgxConn(t, dsn)
		for _, c := range []*pgx.Conn{first, second, first, second} {
			require.NoError(t, c.QueryRow(ctx(t), q, 1).Scan(&n))
			require.Equal(t, 2, n)
		}
	})

	// gorm's PrepareStmt prepares through database/sql, which names the
	// statement itself whatever the exec mode: the second process's prepare
	// of the same statement collides with the first's on the shared server
	// connection. This is the failure the repository's own PrepareStmt
	// session used to cause on UpdateSyncProgress; the repository now
	// prepares nothing, and an application must not turn it on behind
	// transaction pooling.
	t.Run("gorm PrepareStmt collides", func(t *testing.T) {
		dsn := withExecMode(t, bouncedDatabase(t, base), "exec")
		open := func() *gorm.DB {
			db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard, PrepareStmt: true})
			require.NoError(t, err)
			sqlDB, err := db.DB()
			require.NoError(t, err)
			sqlDB.SetMaxOpenConns(1)
			t.Cleanup(func() { _ = sqlDB.Close() })
			return db
		}
		first, second := open(), open()
		var n int
		require.NoError(t, first.Raw("SELECT ?::int + 1", 1).Scan(&n).Error)
		err := second.Raw("SELECT ?::int + 1", 1).Scan(&n).Error
		requirePgCode(t, err, "42P05", "prepared statement \"stmt_")
	})

	// A search_path in the DSN is a startup parameter: PgBouncer refuses the
	// connection unless told to ignore it (ignore_startup_parameters, which
	// drops it silently: the tables would land in the role's default
	// schema) or to track it (track_extra_parameters, PgBouncer 1.20 and
	// later, only for parameters the server reports to the client, which
	// search_path is not on PostgreSQL 15). Set it per role or database on
	// the server instead.
	t.Run("search_path startup parameter", func(t *testing.T) {
		u, err := url.Parse(withExecMode(t, bouncedDatabase(t, base), "exec"))
		require.NoError(t, err)
		q := u.Query()
		q.Set("search_path", "elsewhere")
		u.RawQuery = q.Encode()
		conn, err := pgx.Connect(ctx(t), u.String())
		if err != nil {
			require.ErrorContains(t, err, "unsupported startup parameter")
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		var setting string
		require.NoError(t, conn.QueryRow(ctx(t), "SHOW search_path").Scan(&setting))
		require.Equal(t, "elsewhere", setting, "PgBouncer accepted search_path but dropped it")
	})
}

func pgxConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func requirePgCode(t *testing.T, err error, code, text string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, "%v", err)
	require.Contains(t, pgErr.Message, text)
}

// workloadTally counts what the bounced workload had acknowledged.
type workloadTally struct {
	mu                                    sync.Mutex
	errs                                  []error
	recorded, committed, collected, auths atomic.Int64
	receipts, passes                      atomic.Int64
	progress                              [3]atomic.Int64 // per shared sync-state row
}

func (w *workloadTally) fail(what string, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	w.errs = append(w.errs, fmt.Errorf("%s: %w", what, err))
	w.mu.Unlock()
}

func runBouncedWorkload(t *testing.T, dsn string) {
	const workers, rounds = 12, 12
	clock := newFakeClock()
	ids := connstoretest.NewIDs("id")
	db := openDSN(t, pgKind, dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: ids.Next})))

	// Two instances starting at once: the migration's advisory lock is
	// transaction-scoped, so it holds behind the pooler.
	var mig sync.WaitGroup
	migErrs := make([]error, 2)
	for i := range migErrs {
		mig.Go(func() { migErrs[i] = migrations.Migrate(context.Background(), db) })
	}
	mig.Wait()
	require.NoError(t, errors.Join(migErrs...))

	settings := planSettingsSeen(t, db)

	opts := repository.Options{NowFunc: clock.Now, NewIDFunc: ids.Next}
	repos := make([]*repository.Repository, 2)
	for i := range repos {
		r, err := repository.New(db, opts)
		require.NoError(t, err)
		repos[i] = r
	}
	shared := func(k int) string { return fmt.Sprintf("shared-%d", k) }
	for k := range 3 {
		require.NoError(t, repos[0].SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: shared(k), ConnectorName: "crm"}, repository.SyncStateInput{
			LastSyncedAt: "t0", Status: models.SyncStatusSyncing}))
	}

	var tally workloadTally
	retries := 1 << 20
	recompute := counterRecompute(nil)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c := context.Background()
			repo := repos[w%2]
			caller := fmt.Sprintf("caller-%d", w)
			for r := range rounds {
				tag := fmt.Sprintf("%d-%d", w, r)
				if _, created, err := repo.RecordOperation(c, opInput(caller, "s-"+tag)); err != nil || !created {
					tally.fail("record "+tag, errors.Join(err, errIf(err == nil && !created, "not created")))
				} else {
					tally.recorded.Add(1)
				}
				outs, err := repo.RecordOperations(c, []repository.OperationInput{
					opInput(caller, "b1-"+tag), opInput(caller, "b2-"+tag), opInput(caller, "b3-"+tag)})
				tally.fail("record batch "+tag, err)
				for _, o := range outs {
					if tally.fail("record batch item "+tag, o.Err); o.Err == nil && o.Created {
						tally.recorded.Add(1)
					}
				}

				ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 4, LeaseFor: time.Minute})
				tally.fail("claim "+tag, err)
				var batch []repository.CommitParams
				for i := range ops {
					p := repository.CommitParams{Fence: repository.FenceOf(&ops[i])}
					if i%2 == 0 {
						_, err := repo.CommitOperation(c, p)
						if tally.fail("commit "+tag, err); err == nil {
							tally.committed.Add(1)
						}
						continue
					}
					batch = append(batch, p)
				}
				if len(batch) > 0 {
					outs, err := repo.CommitOperations(c, batch)
					tally.fail("commit batch "+tag, err)
					for _, o := range outs {
						if tally.fail("commit batch item "+tag, o.Err); o.Err == nil {
							tally.committed.Add(1)
						}
					}
				}

				k := (w + r) % 3
				err = repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: shared(k), ConnectorName: "crm"},
					Recompute: recompute, MaxRetries: &retries})
				if tally.fail("update progress "+tag, err); err == nil {
					tally.progress[k].Add(1)
				}
				_, err = repo.GetSyncState(c, repository.ConnectorKey{OwnerDID: shared(k), ConnectorName: "crm"})
				tally.fail("get sync state "+tag, err)
				tally.fail("set sync state "+tag, repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "own-" + caller, ConnectorName: "crm"}, repository.SyncStateInput{
					LastSyncedAt: tag, EntityCount: int64(r), Status: models.SyncStatusIdle}))

				in := repository.PendingAuthInput{State: "state-" + tag, CodeVerifier: models.Secret(verifier),
					OwnerDID: "owner", ConnectorName: "crm", RedirectURI: "https://app.example/callback",
					Scopes: []string{"contacts.read"}, ExpiresAt: clock.At(10 * time.Minute)}
				_, err = repo.SavePendingAuth(c, in)
				tally.fail("save pending auth "+tag, err)
				_, err = repo.ConsumePendingAuth(c, repository.ConsumeParams{State: in.State, OwnerDID: "owner", ConnectorName: "crm"})
				if tally.fail("consume pending auth "+tag, err); err == nil {
					tally.auths.Add(1)
				}

				rec := receipt("prov-" + tag)
				rec.Partition = fmt.Sprintf("part-%d", w%3) // recorders of a partition take its advisory lock
				ok, err := repo.RecordRelistReceipt(c, rec, cands("doc-"+tag))
				if tally.fail("record receipt "+tag, errors.Join(err, errIf(err == nil && !ok, "not recorded"))); err == nil && ok {
					tally.receipts.Add(1)
				}
			}
		})
	}
	// Retention passes run meanwhile, one at a time as a periodic job runs
	// them: passes running at once can deadlock on each other's DELETE
	// (RELIABILITY.md, "Behind PgBouncer").
	done := make(chan struct{})
	var janitor sync.WaitGroup
	janitor.Go(func() {
		for {
			n, err := repos[1].CollectFinishedOperations(context.Background(),
				repository.CollectParams{Before: clock.At(time.Hour), Limit: 50})
			tally.fail("collect", err)
			tally.collected.Add(n)
			tally.passes.Add(1)
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	wg.Wait()
	close(done)
	janitor.Wait()
	require.Empty(t, tally.errs, "every call through PgBouncer succeeds")

	for k := range 3 {
		got, err := repos[0].GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: shared(k), ConnectorName: "crm"})
		require.NoError(t, err)
		acked := tally.progress[k].Load()
		require.Equal(t, acked, got.Version, "%s: one version bump per acknowledged CAS write", shared(k))
		require.Equal(t, acked, got.EntityCount, "%s: every acknowledged CAS write counted once", shared(k))
	}
	for w := range workers {
		got, err := repos[0].GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: fmt.Sprintf("own-caller-%d", w), ConnectorName: "crm"})
		require.NoError(t, err)
		require.Equal(t, int64(rounds-1), got.EntityCount)
	}
	recorded, committed, collected := tally.recorded.Load(), tally.committed.Load(), tally.collected.Load()
	require.Equal(t, int64(workers*rounds*4), recorded)
	require.Equal(t, recorded-collected, count(t, db, &models.Operation{}), "retention deleted exactly what it reported")
	require.Equal(t, committed-collected, count(t, db, &models.Operation{}, "state = ?", models.OperationCommitted))
	require.Equal(t, recorded-committed, count(t, db, &models.Operation{}, "state = ?", models.OperationAttempted))
	require.Zero(t, count(t, db, &models.Operation{}, "lease_token IS NOT NULL"), "every claimed operation committed")
	require.Equal(t, int64(workers*rounds), tally.auths.Load())
	require.Equal(t, tally.auths.Load(), count(t, db, &models.PendingAuth{}, "consumed_at IS NOT NULL"))
	require.Equal(t, int64(workers*rounds), tally.receipts.Load())
	for p := range 3 {
		var seqs []int64
		require.NoError(t, db.Model(&models.SweepReceipt{}).Where(`"partition" = ?`, fmt.Sprintf("part-%d", p)).
			Order("sequence").Pluck("sequence", &seqs).Error)
		for i, s := range seqs {
			require.Equal(t, int64(i+1), s, "part-%d: receipt sequences 1..n, none taken twice", p)
		}
	}
	// The claim's and retention's planner settings are transaction-local: no
	// server connection the pooler lends out afterwards carries them.
	require.Equal(t, settings, planSettingsSeen(t, db), "planner settings leaked onto pooled server connections")
	t.Logf("%d operations recorded, %d committed, %d collected in %d passes; %v CAS writes on the shared rows",
		recorded, committed, collected, tally.passes.Load(), []int64{tally.progress[0].Load(), tally.progress[1].Load(), tally.progress[2].Load()})
}

// planSettingsSeen reads the planner settings the repository changes
// (enable_bitmapscan, plan_cache_mode, jit) from as many server
// connections at once as the handle opens, and returns each distinct
// combination seen.
func planSettingsSeen(t *testing.T, db *gorm.DB) map[string]bool {
	t.Helper()
	const readers = 16
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	errs := make([]error, readers)
	for i := range readers {
		wg.Go(func() {
			errs[i] = db.Transaction(func(tx *gorm.DB) error {
				var bitmap, planCache, jit string
				// Held open together, the transactions take distinct
				// server connections.
				if err := tx.Raw("SELECT current_setting('enable_bitmapscan'), current_setting('plan_cache_mode'), current_setting('jit'), pg_sleep(0.05)").
					Row().Scan(&bitmap, &planCache, &jit, new(any)); err != nil {
					return err
				}
				mu.Lock()
				seen[bitmap+"/"+planCache+"/"+jit] = true
				mu.Unlock()
				return nil
			})
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return seen
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}
