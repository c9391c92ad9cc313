package repository

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/connstore/connstore/internal/flow"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
)

// convertBatch is the fewest due plain rows a claim in flow mode examines
// for rows to move under flow control (more when its limit is larger).
const convertBatch = 1024

// convertToFlow moves under flow control the rows of controlled accounts
// among the first due rows of the plain claim index (convertBatch, or the
// claim's limit if larger), and reports how many it moved: rows recorded
// before their account came under control (a limit set, a pause) or by a
// writer the insert trigger did not see. Each such row moves once, so a
// claim's cost stays bound to its limit; the plain claim after it leases
// only rows under no control, so none of them is leased around a limit.
func (r *Repository) convertToFlow(ctx context.Context, p ClaimParams, now time.Time) (int, error) {
	p.Limit = max(p.Limit, convertBatch)
	pick := r.dueToClaimWith(ctx, p, now, "caller_did", "operation_id", "connector_name", "account_key")
	var found []struct {
		CallerDID     string `gorm:"column:caller_did"`
		OperationID   string `gorm:"column:operation_id"`
		ConnectorName string `gorm:"column:connector_name"`
		AccountKey    string `gorm:"column:account_key"`
	}
	err := flow.Controlled(r.base(ctx), pick).Scan(&found).Error
	if err != nil || len(found) == 0 {
		return 0, err
	}
	keys := make([][]any, len(found))
	var accounts []flow.Key
	for i, f := range found {
		keys[i] = []any{f.CallerDID, f.OperationID}
		accounts = append(accounts, flow.Key{ConnectorName: f.ConnectorName, AccountKey: f.AccountKey})
	}
	from, vars, err := jsonTable(r.dialect.Name(), []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id")}, keys)
	if err != nil {
		return 0, err
	}
	if err := r.base(ctx).Model(&models.Operation{}).Where(store.KeyInRows(from, vars)).Update("flow", true).Error; err != nil {
		return 0, fmt.Errorf("move operations under flow control: %w", err)
	}
	return len(found), flow.Adopt(r.base(ctx), r.dialect, accounts, now.UnixMilli())
}

// flowClaim runs the flow claim in the claim's transaction, leasing what it
// picks with the claim's own lease values.
func (r *Repository) flowClaim(ctx context.Context, p ClaimParams, now time.Time, lease map[string]any) (flow.Result, error) {
	s := flow.Store{
		DB:       r.base(ctx),
		Ops:      func() *gorm.DB { return r.conn(ctx) },
		Dialect:  r.dialect,
		LeaseNow: r.leaseNow(),
		Lease: func(keys []flow.Key2) ([]models.Operation, error) {
			rows := make([][]any, len(keys))
			for i, k := range keys {
				rows[i] = []any{k.CallerDID, k.OperationID}
			}
			from, vars, err := jsonTable(r.dialect.Name(), []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id")}, rows)
			if err != nil {
				return nil, err
			}
			var ops []models.Operation
			err = r.scanOps(r.base(ctx), &ops).Clauses(r.returnOps).Where(store.KeyInRows(from, vars)).Updates(lease).Error
			return ops, err
		},
	}
	return flow.Claim(ctx, s, flow.Params{Limit: p.Limit, NowMs: now.UnixMilli(), LeaseDue: now.Add(p.LeaseFor).UnixMilli(),
		ConnectorName: p.ConnectorName, OwnerDID: p.OwnerDID, Narrowed: p.OwnerDID != "" || len(r.scopes) > 0})
}

// wakeFlow tells the flow control that these rows' writes freed their
// accounts' slots or changed their due times (a finish, a retry, a
// release, a requeue): a claim looks at the accounts again now. Rows under
// no flow control cost nothing. It runs after the write, on its own: a
// wake lost to a crash between the two delays the account until its next
// lease expiry, never past a limit.
func (r *Repository) wakeFlow(ctx context.Context, ops []*models.Operation, released map[opKey]bool) error {
	var keys []flow.Key
	refund, succeeded := map[flow.Key]int64{}, map[flow.Key]int64{}
	for _, op := range ops {
		if op == nil || !op.Flow {
			continue
		}
		k := flow.Key{ConnectorName: op.ConnectorName, AccountKey: op.AccountKey}
		keys = append(keys, k)
		if released[opKey{op.CallerDID, op.OperationID}] {
			// Its weight back to its account's rate and its connector's.
			refund[k] += flow.Units(op.Weight)
			refund[flow.Key{ConnectorName: op.ConnectorName}] += flow.Units(op.Weight)
		}
		if op.State == models.OperationCommitted {
			succeeded[k]++
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, flow.Key.Compare)
	woke, err := flow.Wake(r.base(ctx), r.dialect, slices.Compact(keys), r.nowMillis(), refund, succeeded)
	if err == nil && woke > 0 && r.dialect.Listens() {
		// Pools of other instances gated on these accounts claim now
		// rather than at their next poll (the recorded-operation channel:
		// a hint, as every announcement is).
		err = flow.Announce(r.base(ctx), migrations.NotifyChannel)
	}
	return err
}
