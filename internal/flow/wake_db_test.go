package flow_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/flow"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// seedAccounts writes n accounts of connector crm, a0 … a(n-1), each
// eligible at eligible and adaptive with a live cap of 1 of 32.
func seedAccounts(t *testing.T, db *gorm.DB, n int, eligible int64) []flow.Key {
	t.Helper()
	keys := make([]flow.Key, n)
	for i := range keys {
		keys[i] = flow.Key{ConnectorName: "crm", AccountKey: fmt.Sprintf("a%05d", i)}
		require.NoError(t, db.Exec(`INSERT INTO kubun_connector_flow_account
			(connector_name, account_key, max_in_flight, adaptive, live_cap, eligible_at) VALUES (?, ?, 32, true, 1, ?)`,
			keys[i].ConnectorName, keys[i].AccountKey, eligible).Error)
	}
	return keys
}

func eligibleAt(t *testing.T, db *gorm.DB, k flow.Key) int64 {
	t.Helper()
	var at int64
	require.NoError(t, db.Raw("SELECT eligible_at FROM kubun_connector_flow_account WHERE connector_name = ? AND account_key = ?",
		k.ConnectorName, k.AccountKey).Scan(&at).Error)
	return at
}

// TestWakeAfterAClaimRewroteTheRow: a claim holds an account's row and
// writes it at its cap (eligible at its lease's expiry) while the commit
// of that lease wakes the account: the wake waits for the claim's lock and
// must then wake the row the claim wrote. Finding the rows by the physical
// ids its lock returned, the wake missed the new version and the account
// slept until its lease's expiry.
func TestWakeAfterAClaimRewroteTheRow(t *testing.T) {
	dbtest.Each(t, []dbtest.Leg{dbtest.PG, dbtest.PGPartitioned}, dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		d, err := dialect.Of(e.DB)
		require.NoError(t, err)
		for _, n := range []int{1, 3} { // a single row is bound value by value, more as JSON
			require.NoError(t, e.DB.Exec("DELETE FROM kubun_connector_flow_account").Error)
			keys := seedAccounts(t, e.DB, n, 1000)
			claim := e.DB.Begin()
			require.NoError(t, claim.Exec("SELECT 1 FROM kubun_connector_flow_account FOR UPDATE").Error)
			woke := make(chan error, 1)
			go func() {
				_, err := flow.Wake(e.DB, d, keys, 2000, nil, nil)
				woke <- err
			}()
			time.Sleep(200 * time.Millisecond) // the wake is waiting for the claim's lock
			require.NoError(t, claim.Exec("UPDATE kubun_connector_flow_account SET eligible_at = 9000000").Error)
			require.NoError(t, claim.Commit().Error)
			require.NoError(t, <-woke)
			for _, k := range keys {
				require.EqualValues(t, 2000, eligibleAt(t, e.DB, k), "rows %d: %v", n, k)
			}
		}
	})
}

// TestConcurrentWakesOfOverlappingAccounts: commits of many pools wake
// overlapping sets of hundreds of accounts at once; every wake succeeds
// (none is chosen as a deadlock's victim) and every row ends awake.
func TestConcurrentWakesOfOverlappingAccounts(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		d, err := dialect.Of(e.DB)
		require.NoError(t, err)
		keys := seedAccounts(t, e.DB, 575, 9000000)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 8 {
			wg.Go(func() {
				for round := range 8 {
					// Overlapping windows of 400 keys, with successes (an
					// update every time) or without.
					start := (g*50 + round*25) % 200
					part := keys[start : start+400]
					succeeded := map[flow.Key]int64{}
					if g%2 == 0 {
						for _, k := range part {
							succeeded[k] = 1
						}
					}
					_, err := flow.Wake(e.DB, d, part, 2000+int64(round), nil, succeeded)
					errs <- err
				}
			})
		}
		go func() { wg.Wait(); close(errs) }()
		for err := range errs {
			require.NoError(t, err)
		}
		for _, k := range keys { // the windows cover every key
			require.Less(t, eligibleAt(t, e.DB, k), int64(9000000), "%v", k)
		}
	})
}
