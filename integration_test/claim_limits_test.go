package integrationtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// dueRow is one seeded due row: key and due time.
type dueRow struct {
	caller, id string
	due        int64
}

// seedDueRows seeds n due rows with distinct due times (now-1 ... now-n),
// assigned in a shuffled key order, spread over several callers (so over the
// partitions of the partitioned leg), owners and connectors; and some rows
// that are not due. It returns the due rows, earliest due first.
func seedDueRows(t *testing.T, e *env, n int, seed uint64) []dueRow {
	t.Helper()
	now := e.clock.Millis()
	r := rand.New(rand.NewPCG(seed, seed+1))
	perm := r.Perm(n)
	var rows []models.Operation
	var due []dueRow
	for i := range n {
		d := now - 1 - int64(perm[i])
		op := dbtest.OpRow(i+1, models.OperationAttempted, ptr(d), int64(i+1))
		op.CallerDID = fmt.Sprintf("caller-%d", i%7)
		op.OwnerDID = fmt.Sprintf("owner-%d", i%3)
		op.ConnectorName = []string{"crm", "billing"}[i%2]
		rows = append(rows, op)
		due = append(due, dueRow{op.CallerDID, op.OperationID, d})
	}
	// Not due: backed off, or finished.
	for i := range 20 {
		op := dbtest.OpRow(n+i+1, models.OperationAttempted, ptr(now+int64(i+1)*1000), 1)
		op.CallerDID = fmt.Sprintf("caller-%d", i%7)
		if i%2 == 0 {
			op.State, op.NextAttemptAt = models.OperationCommitted, nil
		}
		rows = append(rows, op)
	}
	seedOps(t, e, rows)
	sort.Slice(due, func(a, b int) bool { return due[a].due < due[b].due })
	return due
}

func dueKeys(rows []dueRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.caller + "/" + r.id
	}
	sort.Strings(out)
	return out
}

func opKeys(ops []models.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.CallerDID + "/" + op.OperationID
	}
	sort.Strings(out)
	return out
}

// TestClaimOddLimitsTakeTheEarliest: claims of limits that are not
// powers of two (and some that are) take exactly min(n, due) rows, and
// exactly the earliest due of what is left.
func TestClaimOddLimitsTakeTheEarliest(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		left := seedDueRows(t, e, 1400, 1)
		for _, n := range []int{3, 5, 1, 50, 100, 7, 2, 63, 65, 129, 1000, 1000} {
			ops := claim(t, e, n, time.Hour)
			want := left[:min(n, len(left))]
			require.Equal(t, dueKeys(want), opKeys(ops), "claim of %d with %d due", n, len(left))
			left = left[len(want):]
		}
		require.Empty(t, left)
		require.Empty(t, claim(t, e, 5, time.Hour))
	})
}

// TestClaimHugeLimits: a huge limit claims every due row.
func TestClaimHugeLimits(t *testing.T) {
	t.Parallel()
	for _, n := range []int{100_000, 1<<30 + 1, 1 << 31, math.MaxInt32, math.MaxInt64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			forEachDB(t, func(t *testing.T, e *env) {
				due := seedDueRows(t, e, 37, 2)
				ops := claim(t, e, n, time.Hour)
				require.Equal(t, dueKeys(due), opKeys(ops))
				require.Empty(t, claim(t, e, n, time.Hour))
			})
		})
	}
}

// TestClaimConcurrentOddLimits: many claimers with odd limits never
// lease a row twice, never take more than their limit, and together take
// every due row.
func TestClaimConcurrentOddLimits(t *testing.T) {
	t.Parallel()
	const total, workers = 1500, 12
	forEachDB(t, func(t *testing.T, e *env) {
		seedDueRows(t, e, total, 3)
		var (
			mu     sync.Mutex
			leased = map[string]string{}
			wg     sync.WaitGroup
			errs   = make(chan error, workers)
		)
		limits := []int{1, 3, 5, 7, 13, 50, 3, 5, 9, 17, 33, 100}
		for w := range workers {
			wg.Go(func() {
				limit := limits[w]
				for {
					ops, err := e.repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: limit, LeaseFor: time.Hour})
					if err != nil {
						errs <- err
						return
					}
					if len(ops) > limit {
						errs <- fmt.Errorf("claim of %d returned %d", limit, len(ops))
						return
					}
					if len(ops) == 0 {
						return
					}
					mu.Lock()
					for _, op := range ops {
						k := op.CallerDID + "/" + op.OperationID
						if prev, dup := leased[k]; dup {
							mu.Unlock()
							errs <- &doubleLease{k, prev, *op.LeaseToken}
							return
						}
						leased[k] = *op.LeaseToken
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		// A worker may see nothing while others hold locks: drain the rest.
		for {
			ops := claim(t, e, 1000, time.Hour)
			if len(ops) == 0 {
				break
			}
			for _, op := range ops {
				k := op.CallerDID + "/" + op.OperationID
				_, dup := leased[k]
				require.False(t, dup, k)
				leased[k] = *op.LeaseToken
			}
		}
		require.Len(t, leased, total)
	})
}

// lockedCount counts the attempted rows another transaction holds a row
// lock on (those FOR UPDATE SKIP LOCKED skips).
func lockedCount(t *testing.T, e *env) int64 {
	t.Helper()
	var all, free int64
	require.NoError(t, e.db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw("SELECT count(*) FROM kubun_connector_operation").Row().Scan(&all); err != nil {
			return err
		}
		return tx.Raw("SELECT count(*) FROM (SELECT 1 FROM kubun_connector_operation FOR UPDATE SKIP LOCKED) s").Row().Scan(&free)
	}))
	return all - free
}

// TestClaimLocksOnlyItsLimit (PostgreSQL legs): a claim in a caller's
// open transaction holds locks on exactly the rows it claimed, not on the
// rest of its pick's power-of-two bucket.
func TestClaimLocksOnlyItsLimit(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		seedDueRows(t, e, 300, 4)
		for _, n := range []int{1, 3, 5, 33, 100} {
			tx := e.db.Begin()
			ops, err := e.repo.WithTx(tx).ClaimOperations(ctx(t), repository.ClaimParams{Limit: n, LeaseFor: time.Hour})
			require.NoError(t, err)
			require.Len(t, ops, n)
			locked := lockedCount(t, e)
			require.NoError(t, tx.Rollback().Error)
			require.Equal(t, int64(n), locked, "rows locked by an open claim of %d", n)
		}
	})
}

// TestClaimSkipsLockedRows (PostgreSQL legs): with the earliest due
// rows locked by another open transaction, a claim of n still takes n rows,
// the earliest of the others.
func TestClaimSkipsLockedRows(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		left := seedDueRows(t, e, 200, 5)
		for _, c := range []struct{ locked, n int }{{2, 3}, {3, 1}, {5, 3}, {1, 2}, {7, 5}, {60, 50}} {
			hold := e.db.Begin()
			var got int64
			for _, r := range left[:c.locked] {
				require.NoError(t, hold.Raw("SELECT 1 FROM kubun_connector_operation WHERE caller_did = ? AND operation_id = ? FOR UPDATE",
					r.caller, r.id).Row().Scan(&got))
			}
			ops := claim(t, e, c.n, time.Hour)
			require.NoError(t, hold.Rollback().Error)
			want := left[c.locked : c.locked+c.n]
			require.Equal(t, dueKeys(want), opKeys(ops), "claim of %d with the %d earliest locked", c.n, c.locked)
			left = append(slices.Clone(left[:c.locked]), left[c.locked+c.n:]...)
		}
	})
}

// TestScopedClaimLeasesAtMostItsLimit: a scoped repository, with connector and
// owner filters, takes exactly min(n, due) of its rows, earliest first.
// With the pick a subquery of the UPDATE's condition, PostgreSQL ran it
// again for every row of the owner the scope's condition found (a nested
// loop over the owner index, no Materialize), and each run locked rows the
// earlier ones had not: a claim of 3 leased 4 (store.PickedUpdate).
func TestScopedClaimLeasesAtMostItsLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		all := seedDueRows(t, e, 600, 6)
		rowOwner := map[string]string{}
		rowConn := map[string]string{}
		var seeded []models.Operation
		require.NoError(t, e.db.Find(&seeded).Error)
		for _, op := range seeded {
			rowOwner[op.CallerDID+"/"+op.OperationID] = op.OwnerDID
			rowConn[op.CallerDID+"/"+op.OperationID] = op.ConnectorName
		}
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("owner-1"))
		require.NoError(t, err)
		left := map[string][]dueRow{}
		for _, r := range all {
			k := r.caller + "/" + r.id
			if rowOwner[k] != "owner-1" {
				continue
			}
			left[rowConn[k]] = append(left[rowConn[k]], r)
			left[""] = append(left[""], r)
		}
		take := func(conn string, n int) {
			t.Helper()
			p := repository.ClaimParams{Limit: n, LeaseFor: time.Hour, ConnectorName: conn}
			if n%2 == 1 {
				p.OwnerDID = "owner-1"
			}
			ops, err := scoped.ClaimOperations(ctx(t), p)
			require.NoError(t, err)
			want := left[conn][:min(n, len(left[conn]))]
			require.Equal(t, dueKeys(want), opKeys(ops), "scoped claim of %d, connector %q", n, conn)
			// Remove the claimed rows from every list.
			claimed := map[string]bool{}
			for _, k := range opKeys(ops) {
				claimed[k] = true
			}
			for c, rows := range left {
				left[c] = slices.DeleteFunc(slices.Clone(rows), func(r dueRow) bool { return claimed[r.caller+"/"+r.id] })
			}
		}
		take("crm", 3)
		take("billing", 5)
		take("", 7)
		take("crm", 50)
		take("", 3)
		take("billing", 100)
		take("", 1000)
		require.Empty(t, left[""])
		// The other owners' rows are untouched.
		require.Equal(t, int64(0), count(t, e.db, &models.Operation{}, "owner_did <> ? AND lease_token IS NOT NULL", "owner-1"))
	})
}

// TestClaimOddLimitsOnTheDatabaseLeaseClock: the database lease clock takes the
// same earliest due rows, odd limits and all.
func TestClaimOddLimitsOnTheDatabaseLeaseClock(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		left := seedDueRows(t, e, 300, 7)
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, LeaseClock: repository.DatabaseLeaseClock})
		require.NoError(t, err)
		for _, n := range []int{3, 5, 1, 50, 100, 1000} {
			ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: n, LeaseFor: time.Hour})
			require.NoError(t, err)
			want := left[:min(n, len(left))]
			require.Equal(t, dueKeys(want), opKeys(ops), "claim of %d", n)
			left = left[len(want):]
		}
	})
}

// TestClaimInCallerTxKeepsSettings (PostgreSQL): in a caller's
// transaction, claims of odd limits leave the caller's own planner
// settings (set with SET LOCAL) as they were, and the defaults when
// nothing was set; claims in the caller's transaction take the earliest.
func TestClaimInCallerTxKeepsSettings(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		left := seedDueRows(t, e, 100, 8)
		show := func(tx *gorm.DB) string {
			var a, b, c string
			require.NoError(t, tx.Raw("SELECT current_setting('plan_cache_mode'), current_setting('enable_bitmapscan'), current_setting('enable_sort')").Row().Scan(&a, &b, &c))
			return a + "/" + b + "/" + c
		}
		err := e.repo.Transaction(ctx(t), func(tx *gorm.DB, repo *repository.Repository) error {
			before := show(tx)
			for _, n := range []int{3, 5} {
				ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: n, LeaseFor: time.Hour})
				require.NoError(t, err)
				require.Equal(t, dueKeys(left[:n]), opKeys(ops))
				left = left[n:]
				require.Equal(t, before, show(tx))
			}
			require.NoError(t, tx.Exec("SET LOCAL plan_cache_mode = force_custom_plan").Error)
			require.NoError(t, tx.Exec("SET LOCAL enable_sort = on").Error)
			require.NoError(t, tx.Exec("SET LOCAL enable_bitmapscan = off").Error)
			mine := show(tx)
			ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 7, LeaseFor: time.Hour})
			require.NoError(t, err)
			require.Equal(t, dueKeys(left[:7]), opKeys(ops))
			left = left[7:]
			require.Equal(t, mine, show(tx))
			return nil
		})
		require.NoError(t, err)
		// WithTx on a handle's own transaction.
		tx := e.db.Begin()
		defer tx.Rollback()
		before := show(tx)
		ops, err := e.repo.WithTx(tx).ClaimOperations(ctx(t), repository.ClaimParams{Limit: 9, LeaseFor: time.Hour})
		require.NoError(t, err)
		require.Equal(t, dueKeys(left[:9]), opKeys(ops))
		require.Equal(t, before, show(tx))
		require.NoError(t, tx.Commit().Error)
		// And on the pool afterwards.
		require.Equal(t, "auto/on/on", show(e.db))
	})
}

// TestScopedClaimOfAFreshBacklog: a repository scoped to one owner
// claims 3 of that owner's fresh backlog (recorded in due order, as rows
// without a next attempt time are): exactly 3 rows, the 3 earliest, at
// several journal sizes, with and without statistics. With the pick run
// again per row of the owner, every due row of the owner was leased (all
// 10 of 30, 67 of 200).
func TestScopedClaimOfAFreshBacklog(t *testing.T) {
	t.Parallel()
	for _, size := range []int{30, 60, 200, 2000} {
		for _, analyze := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d rows, analyzed %v", size, analyze), func(t *testing.T) {
				t.Parallel()
				forEachDB(t, func(t *testing.T, e *env) {
					var rows []models.Operation
					for i := range size {
						op := dbtest.OpRow(i+1, models.OperationAttempted, nil, int64(i+1))
						op.OwnerDID = fmt.Sprintf("owner-%d", i%3)
						rows = append(rows, op)
					}
					seedOps(t, e, rows)
					if analyze {
						require.NoError(t, e.db.Exec("ANALYZE").Error)
					}
					scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("owner-1"))
					require.NoError(t, err)
					ops, err := scoped.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Hour})
					require.NoError(t, err)
					require.Equal(t, []string{"op-000002", "op-000005", "op-000008"}, ids(ops), "a scoped claim of 3")
					require.Equal(t, int64(3), count(t, e.db, &models.Operation{}, "lease_token IS NOT NULL"), "rows leased by a claim of 3")
				})
			})
		}
	}
}

// TestClaimScopeOnATableNamedPicked: a repository's scope may read the
// application's own tables; one named picked (the claim's CTE was named so)
// made the claim fail on every leg, a missing column on PostgreSQL and a
// circular reference on SQLite, while reads through the scope worked. The
// names the claim statement introduces carry the store's table prefix.
func TestClaimScopeOnATableNamedPicked(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.db.Exec("CREATE TABLE picked (did text PRIMARY KEY)").Error)
		require.NoError(t, e.db.Exec("INSERT INTO picked VALUES ('owner-1')").Error)
		var rows []models.Operation
		for i := range 9 {
			op := dbtest.OpRow(i+1, models.OperationAttempted, nil, int64(i+1))
			op.OwnerDID = fmt.Sprintf("owner-%d", i%3)
			rows = append(rows, op)
		}
		seedOps(t, e, rows)
		scoped, err := e.repo.WithScopes(ctx(t), func(db *gorm.DB) *gorm.DB {
			return db.Where("owner_did IN (SELECT did FROM picked)")
		})
		require.NoError(t, err, "WithScopes accepts the scope")
		got, err := scoped.ListOperationsByOwner(ctx(t), repository.ListOperationsParams{OwnerDID: "owner-1", Limit: 10})
		require.NoError(t, err, "a read through the scope")
		require.Len(t, got, 3)
		ops, err := scoped.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 2, LeaseFor: time.Hour})
		require.NoError(t, err, "the claim through the same scope")
		require.Equal(t, []string{"op-000002", "op-000005"}, ids(ops))
	})
}
