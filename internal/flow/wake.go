package flow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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
// one statement per account in key order, each changing the row only when
// it moves it earlier; refund gives back, per account, the rate's tokens of
// leases released unstarted (in units: their weights; a connector's, keyed
// with an empty AccountKey, after every account's), and succeeded counts its successes toward an
// adaptive cap's growth (one more after GrowAfter successes, up to
// MaxInFlight: the additive half of AIMD). keys must be sorted and
// distinct. It returns how many accounts it woke.
func Wake(db *gorm.DB, keys []Key, nowMs int64, refund, succeeded map[Key]int64) (int64, error) {
	var woke int64
	for _, k := range keys {
		set := map[string]any{"eligible_at": gorm.Expr(notPausedAt, nowMs, nowMs)}
		where := db.Table(Table).Where("connector_name = ? AND account_key = ?", k.ConnectorName, k.AccountKey)
		if n := succeeded[k]; n > 0 {
			grown := "adaptive AND successes + ? >= COALESCE(grow_after, ?)"
			set["successes"] = gorm.Expr("CASE WHEN NOT adaptive THEN successes WHEN "+grown+" THEN 0 ELSE successes + ? END",
				n, DefaultGrowAfter, n)
			set["live_cap"] = gorm.Expr("CASE WHEN "+grown+" AND live_cap < max_in_flight THEN live_cap + 1 ELSE live_cap END",
				n, DefaultGrowAfter)
			where = where.Where("adaptive OR eligible_at > "+notPausedAt, nowMs, nowMs)
		}
		if n := refund[k]; n > 0 {
			set["tat_us"] = refunded(n, nowMs)
		} else if succeeded[k] == 0 {
			where = where.Where("eligible_at > "+notPausedAt, nowMs, nowMs)
		}
		res := where.Updates(set)
		if res.Error != nil {
			return woke, fmt.Errorf("wake account %s/%s: %w", k.ConnectorName, k.AccountKey, res.Error)
		}
		woke += res.RowsAffected
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
			Update("tat_us", refunded(refund[k], nowMs)).Error
		if err != nil {
			return woke, fmt.Errorf("refund connector %s: %w", k.ConnectorName, err)
		}
	}
	return woke, nil
}

// refunded is a row's tat with n units given back: back by n emission
// intervals, never before now (GCRA's Refund, in SQL).
func refunded(n, nowMs int64) clause.Expr {
	back := "tat_us - ? * ((period_ms * 1000 + rate - 1) / rate)"
	return gorm.Expr("CASE WHEN rate IS NULL OR rate <= 0 OR period_ms IS NULL THEN tat_us WHEN "+back+
		" > ? THEN "+back+" ELSE ? END", n, nowMs*1000, n, nowMs*1000)
}

// Adopt makes sure each account of rows just moved under flow control has
// its row (a connector under control brings its accounts in as their rows
// come due) and wakes it.
func Adopt(db *gorm.DB, keys []Key, nowMs int64) error {
	seen := map[Key]bool{}
	var rows []models.FlowAccount
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			rows = append(rows, models.FlowAccount{ConnectorName: k.ConnectorName, AccountKey: k.AccountKey, EligibleAt: nowMs, UpdatedAt: nowMs})
		}
	}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
		return fmt.Errorf("adopt accounts: %w", err)
	}
	sorted := make([]Key, 0, len(seen))
	for k := range seen {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, Key.Compare)
	_, err := Wake(db, sorted, nowMs, nil, nil)
	return err
}
