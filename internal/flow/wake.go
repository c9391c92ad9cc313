package flow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/jsonrows"
	"gorm.io/gorm"
)

// Compare orders keys by connector, then account: the order every writer
// takes accounts' rows in, so two writers never wait for each other.
func (k Key) Compare(o Key) int {
	return cmp.Or(strings.Compare(k.ConnectorName, o.ConnectorName), strings.Compare(k.AccountKey, o.AccountKey))
}

// notPausedAt is eligible_at's wake value at ? (epoch ms): then, or the
// end of the account's pause.
const notPausedAt = "CASE WHEN paused_until IS NOT NULL AND paused_until > ? THEN paused_until ELSE ? END"

// Wake moves each account's eligible_at back to now (or its pause's end),
// changing a row only when that moves it earlier; refund gives back, per
// account, the rate's tokens of leases released unstarted (in units: their
// weights; a connector's, keyed with an empty AccountKey, after every
// account's), and succeeded counts its successes toward an adaptive cap's
// growth (one more after GrowAfter successes, up to MaxInFlight: the
// additive half of AIMD). keys must be sorted and distinct. The accounts
// are one statement. Its CTE locks their rows in key order, and the update
// changes only rows the CTE has returned, so whatever the update's plan,
// every row is first locked in key order, and two wakes of overlapping
// accounts never wait for each other in a cycle. Which rows change is
// judged on the rows as the CTE locked them, never on the update's own
// snapshot: a claim that holds an account's row has counted the lease this
// wake ends as live and writes the account asleep until that lease's
// expiry; the wake waits for it and must judge the row the claim wrote.
// Judged on its snapshot (taken before it waited, where the row was
// awake), it changed nothing and the account slept until the expiry
// (TestWakeAfterAClaimRewroteTheRow). It returns how many accounts it woke.
func Wake(db *gorm.DB, d dialect.Dialect, keys []Key, nowMs int64, refund, succeeded map[Key]int64) (int64, error) {
	var woke int64
	if len(keys) > 0 {
		s := Store{DB: db, Dialect: d}
		bind := func() (string, []any, error) {
			return accountRows(s, keys, []jsonrows.Col{{Name: "r", Type: "bigint"}, {Name: "s", Type: "bigint"}},
				func(i int) []any { return []any{refund[keys[i]], succeeded[keys[i]]} })
		}
		from, vars, err := bind()
		if err != nil {
			return 0, err
		}
		lockFrom, lockVars, _ := bind()
		locked := d.LockRows(db.Table(Table+" AS o").Select("o.connector_name AS l_c, o.account_key AS l_a, o.eligible_at AS l_eligible_at, o.paused_until AS l_paused_until, o.adaptive AS l_adaptive").
			Where("(o.connector_name, o.account_key) IN (SELECT v.c, v.a FROM "+lockFrom+")", lockVars...).
			Order("o.connector_name, o.account_key"), false, false)
		grown := "adaptive AND successes + v.s >= COALESCE(grow_after, ?)"
		set := "eligible_at = CASE WHEN eligible_at > " + notPausedAt + " THEN " + notPausedAt + " ELSE eligible_at END, " +
			"successes = CASE WHEN v.s = 0 OR NOT adaptive THEN successes WHEN " + grown + " THEN 0 ELSE successes + v.s END, " +
			"live_cap = CASE WHEN v.s > 0 AND " + grown + " AND live_cap < max_in_flight THEN live_cap + 1 ELSE live_cap END, " +
			"tat_us = CASE WHEN v.r > 0 THEN " + refundedBy("v.r") + " ELSE tat_us END"
		refundVars := []any{nowMs * 1000, nowMs * 1000}
		setVars := append([]any{nowMs, nowMs, nowMs, nowMs, DefaultGrowAfter, DefaultGrowAfter}, refundVars...)
		// Which rows to change is judged on the locked rows (l), as they are
		// once their lock is had, never on the update's own snapshot.
		lockedNotPaused := "CASE WHEN l.l_paused_until IS NOT NULL AND l.l_paused_until > ? THEN l.l_paused_until ELSE ? END"
		where := "l.l_c = v.c AND l.l_a = v.a AND (v.r > 0 OR (v.s > 0 AND l.l_adaptive) OR l.l_eligible_at > " + lockedNotPaused + ")"
		n, err := updateFrom(db, "WITH l AS MATERIALIZED (?) ", []any{locked}, from+", l", vars, set, setVars, where, nowMs, nowMs)
		if err != nil {
			return 0, fmt.Errorf("wake accounts: %w", err)
		}
		woke = n
	}
	// The connectors' rates are given back last, after every account's
	// row: a claim takes an account's row (never waiting: SKIP LOCKED) and
	// then its connector's, so a wake in one transaction never holds a
	// connector while it waits for an account.
	var conns []Key
	for k, n := range refund {
		if k.AccountKey == "" && n > 0 {
			conns = append(conns, k)
		}
	}
	slices.SortFunc(conns, Key.Compare)
	for _, k := range conns {
		err := db.Table(Table).Where("connector_name = ? AND account_key = ''", k.ConnectorName).
			Update("tat_us", gorm.Expr(refundedBy("?"), refund[k], nowMs*1000, refund[k], nowMs*1000)).Error
		if err != nil {
			return woke, fmt.Errorf("refund connector %s: %w", k.ConnectorName, err)
		}
	}
	return woke, nil
}

// refundedBy is a row's tat with n units given back (n an SQL
// expression, written twice; the two ? are now in epoch µs): back by n
// emission intervals, never before now (GCRA's Refund, in SQL).
func refundedBy(n string) string {
	back := "tat_us - " + n + " * ((period_ms * 1000 + rate - 1) / rate)"
	return "CASE WHEN rate IS NULL OR rate <= 0 OR period_ms IS NULL THEN tat_us WHEN " + back + " > ? THEN " + back + " ELSE ? END"
}

// Adopt makes sure each account of rows just moved under flow control has
// its row (a connector under control brings its accounts in as their rows
// come due) and wakes it.
func Adopt(db *gorm.DB, d dialect.Dialect, keys []Key, nowMs int64) error {
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, Key.Compare)
	sorted = slices.Compact(sorted)
	from, vars, err := accountRows(Store{DB: db, Dialect: d}, sorted, nil, nil)
	if err != nil {
		return err
	}
	// One statement, inserting in key order (two adopting claims then
	// never wait for each other's new keys in a cycle); WHERE true keeps
	// SQLite from reading ON CONFLICT as a join's ON.
	err = db.Exec("INSERT INTO "+Table+" (connector_name, account_key, eligible_at, updated_at) SELECT v.c, v.a, ?, ? FROM "+from+
		" WHERE true ORDER BY v.c, v.a ON CONFLICT DO NOTHING", append([]any{nowMs, nowMs}, vars...)...).Error
	if err != nil {
		return fmt.Errorf("adopt accounts: %w", err)
	}
	_, err = Wake(db, d, sorted, nowMs, nil, nil)
	return err
}
