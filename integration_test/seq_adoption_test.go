package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// requireSeqInRecordOrder checks that every operation has a seq, that seqs
// are unique, and that they follow (created_at, caller, operation id) for
// the rows recorded before (numbered by the migration or FillSeq).
func requireSeqInRecordOrder(t *testing.T, db *gorm.DB) {
	t.Helper()
	var unnumbered, dupes, outOfOrder int64
	require.NoError(t, db.Raw(`SELECT COUNT(*) FROM kubun_connector_operation WHERE seq IS NULL`).Scan(&unnumbered).Error)
	require.NoError(t, db.Raw(`SELECT COUNT(*) - COUNT(DISTINCT seq) FROM kubun_connector_operation`).Scan(&dupes).Error)
	require.NoError(t, db.Raw(`SELECT COUNT(*) FROM (SELECT seq, LAG(seq) OVER (ORDER BY created_at, caller_did, operation_id) AS prev
		FROM kubun_connector_operation WHERE seq < 0) s WHERE seq <= prev`).Scan(&outOfOrder).Error)
	require.Zero(t, unnumbered, "rows without a seq")
	require.Zero(t, dupes, "seqs taken twice")
	require.Zero(t, outOfOrder, "rows numbered out of their record order")
}

// TestSeqAdoptionNumbersEveryRowInOrder: a journal migrated before 0019
// (rolled back to it) with rows in it, on both databases: migrating numbers
// every row, in record order, below every row recorded after, and the
// listings page through all of them.
func TestSeqAdoptionNumbersEveryRowInOrder(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := ctx(t)
		rollbackThrough(t, e.db, mig0019)
		// Records out of key order and with ties on created_at, as a journal has.
		for i, id := range []string{"op-9", "op-1", "op-5", "op-3", "op-7"} {
			now := e.clock.Millis() + int64(i/2)
			require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
				owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
				reissue_intent, state, attempts, version, incarnation, created_at, updated_at)
				VALUES ('caller', ?, 'n', 'owner', 'crm', 'm', 'create', 'a', 't', ?, 'h', '{}', 'committed', 0, 0, 'i', ?, ?)`,
				id, "e"+id, now, now).Error)
		}
		require.NoError(t, migrations.Migrate(c, e.db))
		requireSeqInRecordOrder(t, e.db)
		in := opInput("caller", "op-0")
		_, _, err := e.repo.RecordOperation(c, in)
		require.NoError(t, err)
		requireSeqInRecordOrder(t, e.db)
		var old, recorded []int64
		require.NoError(t, e.db.Raw(`SELECT seq FROM kubun_connector_operation WHERE operation_id <> 'op-0' ORDER BY seq`).Scan(&old).Error)
		require.NoError(t, e.db.Raw(`SELECT seq FROM kubun_connector_operation WHERE operation_id = 'op-0'`).Scan(&recorded).Error)
		require.Len(t, old, 5)
		require.Less(t, old[4], int64(0), "rows recorded before 0019 are numbered below zero")
		require.Equal(t, []int64{1}, recorded, "a row recorded after it takes the first positive number")

		// The committed listing, a page at a time, in record order: the
		// rows recorded before first, ties on created_at in key order.
		var got []string
		var after *repository.ListCursor
		for range 10 {
			page, err := e.repo.ListOperationsByState(c, repository.ListByStateParams{State: models.OperationCommitted, Limit: 2, After: after})
			require.NoError(t, err)
			for _, op := range page {
				got = append(got, op.OperationID)
			}
			if len(page) < 2 {
				break
			}
			after = repository.CursorAfter(&page[len(page)-1])
		}
		require.Equal(t, []string{"op-1", "op-9", "op-3", "op-5", "op-7"}, got)
	})
}

// TestSeqFillAt1MWithoutALongLock (PostgreSQL): a journal of 1,000,000
// rows from before 0019 is numbered in batches after the migration's
// transaction, while a writer updates rows of the journal with a 5 s lock
// timeout: no write waits out the timeout (a fill in one transaction would
// hold every row's lock until its end), writes land while the fill runs,
// and every row ends up numbered, in record order. The migration's own
// transaction (the column, its default, the listing indexes: index builds
// that writers wait for, as for any index migration) is timed and logged;
// the writer starts once it has committed, the fill held back until then
// by the test holding the fill's advisory lock.
func TestSeqFillAt1MWithoutALongLock(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	c := ctx(t)
	const rows = 1_000_000
	rollbackThrough(t, e.db, mig0019)
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, state, attempts, version, incarnation, created_at, updated_at)
		SELECT 'caller-' || (g % 7), 'op-' || g, 'n', 'owner-' || (g % 50), 'crm', 'm', 'create', 'a', 't', 'e' || g, 'h', '{}',
			'committed', 0, 0, 'i', CAST(? AS BIGINT) - (g / 3), CAST(? AS BIGINT)
		FROM generate_series(1, ?) g`, now, now, rows).Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)

	// Hold FillSeq's lock (migrations.fillLockNamespace: "conn" + 19), so
	// that Migrate commits its DDL and then waits to fill.
	holder := openDSN(t, e.kind, e.dsn).Begin()
	require.NoError(t, holder.Error)
	require.NoError(t, holder.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", 0x636f6e6e+19).Error)
	var holderPID int64
	require.NoError(t, holder.Raw("SELECT pg_backend_pid()").Scan(&holderPID).Error)
	start := time.Now()
	migrated := make(chan error, 1)
	go func() { migrated <- migrations.Migrate(c, e.db) }()
	require.Eventually(t, func() bool {
		var waiting int64
		require.NoError(t, e.db.Raw(`SELECT count(*) FROM pg_stat_activity
			WHERE CAST(? AS integer) = ANY (pg_blocking_pids(pid))`, holderPID).Scan(&waiting).Error)
		return waiting > 0
	}, time.Minute, 10*time.Millisecond, "Migrate waits for the fill lock")
	ddl := time.Since(start)

	var filling atomic.Bool
	filling.Store(true)
	writes, during := atomic.Int64{}, atomic.Int64{}
	var slowest atomic.Int64
	writerDone := make(chan error, 1)
	writeCtx, stopWriter := context.WithCancel(c)
	// What a write waits on, sampled, so that a failure names it.
	var writerPID atomic.Int64
	blockers := watchBlockers(writeCtx, t, openDSN(t, e.kind, e.dsn), &writerPID)
	go func() {
		var err error
		for i := 0; writeCtx.Err() == nil; i++ {
			began := time.Now()
			err = e.db.WithContext(writeCtx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec("SET LOCAL lock_timeout = '5s'").Error; err != nil {
					return err
				}
				var pid int64
				if err := tx.Raw("SELECT pg_backend_pid()").Scan(&pid).Error; err != nil {
					return err
				}
				writerPID.Store(pid)
				return tx.Exec(`UPDATE kubun_connector_operation SET provider_etag = ? WHERE caller_did = ? AND operation_id = ?`,
					fmt.Sprint(i), fmt.Sprintf("caller-%d", (i*7919)%rows%7), fmt.Sprintf("op-%d", (i*7919)%rows)).Error
			})
			if err != nil {
				break
			}
			if d := int64(time.Since(began)); d > slowest.Load() {
				slowest.Store(d)
			}
			writes.Add(1)
			if filling.Load() {
				during.Add(1)
			}
		}
		if errors.Is(err, context.Canceled) || writeCtx.Err() != nil {
			err = nil
		}
		writerDone <- err
	}()
	require.Eventually(t, func() bool { return writes.Load() > 0 }, 10*time.Second, time.Millisecond, "the writer runs")
	fillStart := time.Now()
	require.NoError(t, holder.Commit().Error)
	require.NoError(t, <-migrated)
	filling.Store(false)
	fill := time.Since(fillStart)
	stopWriter()
	require.NoError(t, <-writerDone, "a write waited out its lock timeout during the fill; it waited on %v", blockers())
	t.Logf("%d rows: migration transaction %v, fill %v; %d writes, %d during the fill, slowest %v; blocked by %v",
		rows, ddl, fill, writes.Load(), during.Load(), time.Duration(slowest.Load()), blockers())
	require.Greater(t, during.Load(), int64(10), "writes land while the fill runs")
	requireSeqInRecordOrder(t, e.db)
	n, err := migrations.FillSeq(c, e.db)
	require.NoError(t, err)
	require.Zero(t, n, "a numbered journal has nothing left to fill")
}

// watchBlockers samples, every 50 ms until ctx ends, the sessions that
// block the backend whose pid is in pid, and returns a function listing
// what it saw (the blocker's backend type, wait and statement).
func watchBlockers(ctx context.Context, t *testing.T, db *gorm.DB, pid *atomic.Int64) func() []string {
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for ctx.Err() == nil {
			var rows []struct {
				BackendType, State, Query string
			}
			_ = db.WithContext(ctx).Raw(`SELECT backend_type, COALESCE(state, '') AS state, LEFT(query, 200) AS query
				FROM pg_stat_activity WHERE pid = ANY (pg_blocking_pids(CAST(? AS integer)))`, pid.Load()).Scan(&rows).Error
			mu.Lock()
			for _, r := range rows {
				seen[r.BackendType+" ("+r.State+"): "+r.Query] = true
			}
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := make([]string, 0, len(seen))
		for k := range seen {
			out = append(out, k)
		}
		return out
	}
}
