package flow

import (
	"fmt"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// NotControlled is a journal row whose account and connector are under no
// flow control: the only rows the plain claim leases once some account is.
const NotControlled = "NOT EXISTS (SELECT 1 FROM " + Table + " f WHERE f.connector_name = kubun_connector_operation.connector_name" +
	" AND f.account_key IN (kubun_connector_operation.account_key, ''))"

// controlledIn is a row of the derived table d (a pick of the plain claim)
// whose account or connector is under flow control.
const controlledIn = "EXISTS (SELECT 1 FROM " + Table + " f WHERE f.connector_name = d.connector_name AND f.account_key IN (d.account_key, ''))"

// Controlled narrows picked, a pick of journal rows with caller_did,
// operation_id, connector_name and account_key, to those of accounts under
// flow control.
func Controlled(db, picked *gorm.DB) *gorm.DB {
	return db.Table("(?) AS d", picked).Where(controlledIn).Select("caller_did, operation_id, connector_name, account_key")
}

var keyCols = []clause.Column{{Name: "connector_name"}, {Name: "account_key"}}

// col is a column of the flow table's stored row in an upsert.
func col(name string) string { return Table + "." + name }

// laterOf is the stored column name or v, whichever is later (a NULL
// column counts as earliest).
func laterOf(name string, v int64) clause.Expr {
	return gorm.Expr("CASE WHEN "+col(name)+" IS NOT NULL AND "+col(name)+" > ? THEN "+col(name)+" ELSE ? END", v, v)
}

// SetLimits writes row's limits (creating the row), to take effect at the
// next claim: the account is looked at from row.EligibleAt on (or its
// pause's end); an adaptive cap restarts from its ceiling.
func SetLimits(db *gorm.DB, row models.FlowAccount) error {
	set := clause.Assignments(map[string]any{
		"max_in_flight": row.MaxInFlight, "rate": row.Rate, "period_ms": row.PeriodMillis, "burst": row.Burst,
		"adaptive": row.Adaptive, "grow_after": row.GrowAfter, "fair": row.Fair, "ordered": row.Ordered,
		"updated_at": row.UpdatedAt, "eligible_at": laterOf("paused_until", row.EligibleAt), "live_cap": row.LiveCap,
	})
	return db.Clauses(clause.OnConflict{Columns: keyCols, DoUpdates: set}).Create(&row).Error
}

// Pause pauses k until (epoch ms), keeping a pause already running longer.
// throttled also lowers an adaptive live cap (AIMD's multiplicative
// half): it halves, but not below the calls of the account the provider
// is still serving (others, its other live leases: it evidently allows
// that many), and always by at least one, never below 1; and it restarts
// the count of successes toward growth. Halving alone, from a cap one above
// the provider's limit, fell to half of the limit and spent most of the
// time below it; with the floor the cap settles at the limit and one above.
// Many 429s at once (a burst of calls over the limit) each lower it, so it
// reaches the limit in one burst, however high it started.
func Pause(db *gorm.DB, k Key, until, nowMs int64, throttled bool, others int64) error {
	row := models.FlowAccount{ConnectorName: k.ConnectorName, AccountKey: k.AccountKey, PausedUntil: &until,
		EligibleAt: until, UpdatedAt: nowMs}
	set := map[string]any{"paused_until": laterOf("paused_until", until), "eligible_at": laterOf("eligible_at", until), "updated_at": nowMs}
	if throttled {
		c := col("live_cap")
		floor := "CASE WHEN ? < " + c + " - 1 THEN ? ELSE " + c + " - 1 END"
		lowered := "CASE WHEN " + c + " / 2 > " + floor + " THEN " + c + " / 2 ELSE " + floor + " END"
		set["live_cap"] = gorm.Expr("CASE WHEN NOT "+col("adaptive")+" OR "+c+" IS NULL THEN "+c+
			" WHEN "+lowered+" < 1 THEN 1 ELSE "+lowered+" END", others, others, others, others, others, others, others, others)
		set["last_decrease_at"] = gorm.Expr("CASE WHEN "+col("adaptive")+" THEN ? ELSE "+col("last_decrease_at")+" END", nowMs)
		set["successes"] = 0
	}
	return db.Clauses(clause.OnConflict{Columns: keyCols, DoUpdates: clause.Assignments(set)}).Create(&row).Error
}

// Resume ends k's pause now and reports whether it was paused; a
// connector's accounts that waited for its pause are looked at again now.
func Resume(db *gorm.DB, k Key, nowMs int64) (bool, error) {
	res := db.Model(&models.FlowAccount{}).
		Where("connector_name = ? AND account_key = ? AND paused_until IS NOT NULL AND paused_until > ?", k.ConnectorName, k.AccountKey, nowMs).
		Updates(map[string]any{"paused_until": nil, "eligible_at": nowMs, "updated_at": nowMs})
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error
	}
	if k.AccountKey == "" {
		err := db.Model(&models.FlowAccount{}).Where("connector_name = ? AND account_key <> '' AND eligible_at > ?", k.ConnectorName, nowMs).
			Where("paused_until IS NULL OR paused_until <= ?", nowMs).Update("eligible_at", nowMs).Error
		if err != nil {
			return true, fmt.Errorf("wake the accounts of %s: %w", k.ConnectorName, err)
		}
	}
	return true, nil
}

// ListParams pages the flow table in key order.
type ListParams struct {
	ConnectorName string
	// PausedAt keeps only rows paused at that time (epoch ms), when not 0.
	PausedAt int64
	After    *Key
	Limit    int
}

// List reads a keyset page of the flow table.
func List(db *gorm.DB, p ListParams) ([]models.FlowAccount, error) {
	q := db.Model(&models.FlowAccount{}).Order("connector_name, account_key").Limit(p.Limit)
	if p.ConnectorName != "" {
		q = q.Where("connector_name = ?", p.ConnectorName)
	}
	if p.PausedAt != 0 {
		q = q.Where("paused_until IS NOT NULL AND paused_until > ?", p.PausedAt)
	}
	if p.After != nil {
		q = q.Where("connector_name > ? OR (connector_name = ? AND account_key > ?)", p.After.ConnectorName, p.After.ConnectorName, p.After.AccountKey)
	}
	var rows []models.FlowAccount
	err := q.Find(&rows).Error
	return rows, err
}

// InFlight counts the live leases of k (an empty account key: of its whole
// connector) at leaseNow: a range of the flow lease index.
func InFlight(db *gorm.DB, k Key, leaseNow any) (int64, error) {
	got, err := InFlightOf(db, []Key{k}, leaseNow)
	return got[k], err
}

// InFlightOf counts the live leases of each of keys (an empty AccountKey:
// the whole connector's) in one statement per accountChunk keys, each
// count a range of the flow lease index: a page of accounts costs its
// leases, not a statement per account.
func InFlightOf(db *gorm.DB, keys []Key, leaseNow any) (map[Key]int64, error) {
	type count struct {
		ConnectorName, AccountKey string
		N                         int64
	}
	probes := make([]*gorm.DB, len(keys))
	for i, k := range keys {
		q := db.Session(&gorm.Session{NewDB: true}).Table("kubun_connector_operation").
			Select("CAST(? AS TEXT) AS connector_name, CAST(? AS TEXT) AS account_key, COUNT(*) AS n", k.ConnectorName, k.AccountKey).
			Where(liveLeases, leaseNow).Where("connector_name = ?", k.ConnectorName)
		if k.AccountKey != "" {
			q = q.Where("account_key = ?", k.AccountKey)
		}
		probes[i] = q
	}
	rows, err := unionAll[count](db, probes)
	if err != nil {
		return nil, err
	}
	out := make(map[Key]int64, len(rows))
	for _, r := range rows {
		out[Key{r.ConnectorName, r.AccountKey}] = r.N
	}
	return out, nil
}

// Announce sends a hint on channel (PostgreSQL's LISTEN/NOTIFY) that
// accounts were woken, so that gated pools of other instances claim now.
func Announce(db *gorm.DB, channel string) error {
	return db.Exec("SELECT pg_notify(?, current_schema())", channel).Error
}
