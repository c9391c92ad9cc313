package flow

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Table is the flow control table.
const Table = "kubun_connector_flow_account"

// Key names an account.
type Key struct{ ConnectorName, AccountKey string }

// Store is what a flow claim needs of the repository, in the claim's
// transaction.
type Store struct {
	// DB is the transaction, unscoped: the flow table and counts.
	DB *gorm.DB
	// Ops is a query of the journal with the repository's scopes.
	Ops     func() *gorm.DB
	Dialect dialect.Dialect
	// LeaseNow is the lease clock's now (a value or an expression).
	LeaseNow any
	// Lease leases the operations named and returns them as leased.
	Lease func(keys []Key2) ([]models.Operation, error)
}

// Key2 is an operation's key.
type Key2 struct{ CallerDID, OperationID string }

// Params is one flow claim.
type Params struct {
	Limit int
	// NowMs is the application clock's now; LeaseDue the due time a lease
	// taken now gets (its expiry by that clock).
	NowMs, LeaseDue int64
	ConnectorName   string
	OwnerDID        string
	// Narrowed is true when the claim sees only some rows of an account
	// (OwnerDID, or a repository's scopes).
	Narrowed bool
}

// Result is what a flow claim leased, and whether work waits behind limits.
type Result struct {
	Ops []models.Operation
	// Read is how many accounts the claim looked at.
	Read int
	// NextEligible is the earliest eligible_at of any account once the
	// claim is done (Never when none): when a claim could lease from one.
	NextEligible int64
}

// On reports whether any account or connector is under flow control.
func On(db *gorm.DB) (bool, error) {
	var found []int
	err := db.Table(Table).Select("1").Limit(1).Find(&found).Error
	return len(found) > 0, err
}

// Claim leases up to p.Limit due operations of accounts under flow control.
func Claim(ctx context.Context, s Store, p Params) (Result, error) {
	var res Result
	nowUs := p.NowMs * 1000
	q := s.DB.Table(Table).Where("account_key <> '' AND eligible_at <= ?", p.NowMs)
	if p.ConnectorName != "" {
		q = q.Where("connector_name = ?", p.ConnectorName)
	}
	var rows []models.FlowAccount
	q = s.Dialect.LockRows(q.Order("eligible_at, connector_name, account_key").Limit(p.Limit), false, true)
	if err := q.Find(&rows).Error; err != nil {
		return res, fmt.Errorf("read eligible accounts: %w", err)
	}
	res.Read = len(rows)
	if len(rows) > 0 {
		conns, err := lockConnectors(s, rows)
		if err != nil {
			return res, err
		}
		accounts := make([]*Account, len(rows))
		for i := range rows {
			accounts[i] = &Account{Row: rows[i]}
		}
		if err := countLive(s, accounts, conns); err != nil {
			return res, err
		}
		for pass := 0; pass < 3 && len(res.Ops) < p.Limit; pass++ {
			if Share(accounts, conns, int64(p.Limit-len(res.Ops)), nowUs) == 0 {
				break
			}
			ops, err := pick(s, p, accounts, conns)
			if err != nil {
				return res, err
			}
			res.Ops = append(res.Ops, ops...)
		}
		if err := settleAccounts(s, p, accounts, conns); err != nil {
			return res, err
		}
	}
	var next []int64
	err := s.DB.Table(Table).Where("account_key <> ''").Select("MIN(eligible_at)").Scan(&next).Error
	if err != nil {
		return res, fmt.Errorf("next eligible account: %w", err)
	}
	res.NextEligible = Never
	if len(next) > 0 && next[0] != 0 {
		res.NextEligible = next[0]
	}
	return res, ctx.Err()
}

// lockConnectors reads, and locks in name order, the rows of the accounts'
// connectors that have limits of their own.
func lockConnectors(s Store, rows []models.FlowAccount) (map[string]*Connector, error) {
	var names []string
	for _, r := range rows {
		names = append(names, r.ConnectorName)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var found []models.FlowAccount
	q := s.Dialect.LockRows(s.DB.Table(Table).Where("account_key = '' AND connector_name IN ?", names).
		Order("connector_name"), false, false)
	if err := q.Find(&found).Error; err != nil {
		return nil, fmt.Errorf("lock connectors: %w", err)
	}
	conns := map[string]*Connector{}
	for i := range found {
		if found[i].MaxInFlight != nil || found[i].Rate != nil || found[i].PausedUntil != nil || found[i].Ordered {
			conns[found[i].ConnectorName] = &Connector{Row: found[i]}
		}
	}
	return conns, nil
}

// liveLeases is the condition of an account's live leases (the flow lease
// index's range).
const liveLeases = store.FlowAttempted + " AND lease_token IS NOT NULL AND lease_expires_at >= ?"

// countLive counts the live leases of the accounts with a cap (one
// statement: each account a range of the flow lease index, as long as its
// live leases), and of the connectors with one.
func countLive(s Store, accounts []*Account, conns map[string]*Connector) error {
	var capped []*Account
	for _, a := range accounts {
		if a.Row.MaxInFlight != nil {
			capped = append(capped, a)
		}
	}
	if len(capped) > 0 {
		type count struct {
			ConnectorName, AccountKey string
			N, D                      int64
		}
		// Each account's live leases: a range of the flow lease index, read
		// once for both the count and the earliest due time.
		got, err := eachAccount[count](s, capped, nil, false, func(c, a any) *gorm.DB {
			q := s.Dialect.ReadIndex(s.DB.Table("kubun_connector_operation"), "kubun_connector_operation", "kubun_connector_operation_flow_lease_idx")
			return q.Select("? AS connector_name, ? AS account_key, COUNT(*) AS n, COALESCE(MIN(COALESCE(next_attempt_at, created_at)), 0) AS d", c, a).
				Where("kubun_connector_operation.connector_name = ? AND kubun_connector_operation.account_key = ?", c, a).
				Where(liveLeases, s.LeaseNow)
		})
		if err != nil {
			return fmt.Errorf("count live leases: %w", err)
		}
		live := map[Key]count{}
		for _, c := range got {
			live[Key{c.ConnectorName, c.AccountKey}] = c
		}
		for _, a := range capped {
			c := live[Key{a.Row.ConnectorName, a.Row.AccountKey}]
			a.Live, a.LiveMinDue = c.N, c.D
		}
	}
	for name, c := range conns {
		if c.Row.MaxInFlight == nil {
			continue
		}
		var n []int64
		err := s.DB.Table("kubun_connector_operation").Select("COUNT(*)").
			Where("connector_name = ?", name).Where(liveLeases, s.LeaseNow).Scan(&n).Error
		if err != nil {
			return fmt.Errorf("count live leases of %s: %w", name, err)
		}
		if len(n) > 0 {
			c.Live = n[0]
		}
	}
	return nil
}

// firstOfDocument is a row of an ordered connector that may be leased: it
// has no document, or no earlier operation of its document is attempted
// (due, in backoff or leased). One probe of the flow document index, read
// whole (never through the claim's scopes: an owner-narrowed claim must
// not pass an earlier operation it does not see). A leased earlier
// operation is attempted until it finishes, so two claims, whatever their
// snapshots, never lease two of one document at once.
const firstOfDocument = `(document_id IS NULL OR NOT EXISTS (SELECT 1 FROM kubun_connector_operation e
	WHERE e.state = '` + models.OperationAttempted + `' AND e.flow AND e.document_id IS NOT NULL
		AND e.connector_name = kubun_connector_operation.connector_name
		AND e.document_id = kubun_connector_operation.document_id AND e.seq < kubun_connector_operation.seq))`

// picked is a row a pick chose.
type picked struct {
	CallerDID     string `gorm:"column:caller_did"`
	OperationID   string `gorm:"column:operation_id"`
	ConnectorName string `gorm:"column:connector_name"`
	AccountKey    string `gorm:"column:account_key"`
	Due           int64  `gorm:"column:due"`
	Seq           int64  `gorm:"column:seq"`
	Weight        int64  `gorm:"column:weight"`
}

// pick chooses each account's due rows, up to its Allow, oldest first,
// keeps of them what the rates have room for by weight (Fit), and leases
// those. The rows read and not kept stay locked to the claim's end (a
// moment) and unchanged.
func pick(s Store, p Params, accounts []*Account, conns map[string]*Connector) ([]models.Operation, error) {
	// Accounts of ordered connectors pick only their documents' first
	// rows: a condition of its own, so a statement of its own.
	var served, plain, ordered []*Account
	for _, a := range accounts {
		if a.Allow == 0 {
			continue
		}
		served = append(served, a)
		if c := conns[a.Row.ConnectorName]; c != nil && c.Row.Ordered {
			ordered = append(ordered, a)
		} else {
			plain = append(plain, a)
		}
	}
	var rows []picked
	for g, group := range [][]*Account{plain, ordered} {
		if len(group) == 0 {
			continue
		}
		got, err := eachAccount[picked](s, group, func(i int) int { return int(group[i].Allow) }, true, func(c, a any) *gorm.DB {
			q := s.Ops().Table("kubun_connector_operation").Select("caller_did, operation_id, connector_name, account_key, COALESCE(next_attempt_at, created_at) AS due, seq, weight").
				Where(store.FlowAttempted+" AND kubun_connector_operation.connector_name = ? AND kubun_connector_operation.account_key = ?", c, a).
				Where("COALESCE(next_attempt_at, created_at) <= ?", p.NowMs).
				Where(clause.Or(clause.Eq{Column: clause.Column{Name: "lease_token"}, Value: nil},
					clause.Lt{Column: clause.Column{Name: "lease_expires_at"}, Value: s.LeaseNow}))
			if p.OwnerDID != "" {
				q = q.Where("owner_did = ?", p.OwnerDID)
			}
			if g == 1 {
				q = q.Where(firstOfDocument)
			}
			q = s.Dialect.ReadIndex(q, "kubun_connector_operation", "kubun_connector_operation_flow_idx")
			return q.Order("COALESCE(next_attempt_at, created_at)")
		})
		if err != nil {
			return nil, fmt.Errorf("pick due operations: %w", err)
		}
		rows = append(rows, got...)
	}
	// Neither a join nor a UNION ALL keeps an order: each account's rows are
	// put back in its pick's (due time, then record order).
	slices.SortFunc(rows, func(x, y picked) int {
		return cmp.Or(strings.Compare(x.ConnectorName, y.ConnectorName), strings.Compare(x.AccountKey, y.AccountKey),
			cmp.Compare(x.Due, y.Due), cmp.Compare(x.Seq, y.Seq))
	})
	byAccount := map[Key][]picked{}
	for _, r := range rows {
		k := Key{r.ConnectorName, r.AccountKey}
		byAccount[k] = append(byAccount[k], r)
	}
	var keys []Key2
	for _, a := range served {
		mine := byAccount[Key{a.Row.ConnectorName, a.Row.AccountKey}]
		weights := make([]int64, len(mine))
		for i, r := range mine {
			weights[i] = r.Weight
		}
		n := Fit(a, conns[a.Row.ConnectorName], weights, p.NowMs*1000)
		for _, r := range mine[:n] {
			keys = append(keys, Key2{r.CallerDID, r.OperationID})
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return s.Lease(keys)
}

// settleAccounts writes every account's and connector's state after the
// claim: the rates' tat and when each account is next looked at.
func settleAccounts(s Store, p Params, accounts []*Account, conns map[string]*Connector) error {
	if err := nextDue(s, accounts, p.Narrowed); err != nil {
		return err
	}
	SetHolds(conns, p.NowMs)
	// One statement for every account: the claim holds their rows (it
	// read them FOR UPDATE), so it waits for no one and locks nothing new.
	after := make([][2]int64, len(accounts))
	for i, a := range accounts {
		after[i][0], after[i][1] = After(a, conns[a.Row.ConnectorName], p.NowMs, p.LeaseDue, p.Narrowed)
	}
	from, vars, err := accountRows(s, keysOf(accounts), []jsonrows.Col{{Name: "t", Type: "bigint"}, {Name: "e", Type: "bigint"}},
		func(i int) []any { return []any{after[i][0], after[i][1]} })
	if err != nil {
		return err
	}
	if _, err := updateFrom(s.DB, "", nil, from, vars, "tat_us = v.t, eligible_at = v.e, updated_at = ?", []any{p.NowMs}, ""); err != nil {
		return fmt.Errorf("settle accounts: %w", err)
	}
	for name, c := range conns {
		if c.Got == 0 && !c.HoldChanged {
			continue
		}
		set := map[string]any{"tat_us": ConnectorTat(c, p.NowMs), "updated_at": p.NowMs}
		if c.HoldChanged {
			set["hold_account"], set["hold_until"] = c.Row.HoldAccount, c.Row.HoldUntil
		}
		err := s.DB.Table(Table).Where("connector_name = ? AND account_key = ''", name).Updates(set).Error
		if err != nil {
			return fmt.Errorf("settle connector %s: %w", name, err)
		}
	}
	return nil
}

// nextDue finds, for each account a pick left without due rows, the
// earliest due time of its other attempted rows: one probe of the flow
// index each.
func nextDue(s Store, accounts []*Account, narrowed bool) error {
	if narrowed {
		return nil
	}
	var probed []*Account
	for _, a := range accounts {
		if !a.Exhausted && a.Got > 0 {
			continue
		}
		a.Exhausted = a.Exhausted || a.Got == 0
		probed = append(probed, a)
	}
	if len(probed) == 0 {
		return nil
	}
	from, vars, err := accountRows(s, keysOf(probed), nil, nil)
	if err != nil {
		return err
	}
	// Per account of v, the first entry of its range of the flow index.
	first := s.Dialect.ReadIndex(s.DB.Table("kubun_connector_operation"), "kubun_connector_operation", "kubun_connector_operation_flow_idx").
		Select("COALESCE(next_attempt_at, created_at)").
		Where(store.FlowAttempted + " AND kubun_connector_operation.connector_name = v.c AND kubun_connector_operation.account_key = v.a")
	first = s.Dialect.FixedLimit(first.Order("COALESCE(next_attempt_at, created_at)"), 1)
	var got []struct {
		ConnectorName, AccountKey string
		D                         int64
	}
	err = s.DB.Raw("SELECT v.c AS connector_name, v.a AS account_key, COALESCE((?), 0) AS d FROM "+from, append([]any{first}, vars...)...).
		Scan(&got).Error
	if err != nil {
		return fmt.Errorf("next due of accounts: %w", err)
	}
	due := map[Key]int64{}
	for _, d := range got {
		due[Key{d.ConnectorName, d.AccountKey}] = d.D
	}
	for _, a := range probed {
		a.NextDue = due[Key{a.Row.ConnectorName, a.Row.AccountKey}]
	}
	return nil
}
