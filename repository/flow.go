package repository

import (
	"context"

	"fmt"
	"time"

	"github.com/connstore/connstore/internal/flow"
	"github.com/connstore/connstore/models"
)

// AccountKey names a provider account, the unit a provider limits: an
// operation's connector and account key. An empty AccountKey names the
// connector itself, whose limits sit above all its accounts (the
// provider's app quota).
type AccountKey struct {
	ConnectorName, AccountKey string
}

// String names the account as connector/account (connector/* for the
// connector itself).
func (k AccountKey) String() string {
	if k.AccountKey == "" {
		return k.ConnectorName + "/*"
	}
	return k.ConnectorName + "/" + k.AccountKey
}

func (k AccountKey) validate() error {
	if err := requireKeys("connector name", k.ConnectorName); err != nil {
		return err
	}
	return requireText("account key", k.AccountKey)
}

// AccountLimits are an account's or a connector's limits; a zero field is
// no limit of that kind, and zero AccountLimits lift every limit (the
// account stays under flow control, claimed fairly with the others).
type AccountLimits struct {
	// MaxInFlight caps the account's live leases across every instance and
	// pool; an expired lease frees its slot, a heartbeat never counts twice.
	MaxInFlight int64
	// Rate starts per Period, at most Burst at once (1 unless set; never
	// above Rate). Enforced by the claim: no operation is leased that the
	// rate would refuse, and a lease released unstarted gives its start back.
	Rate   int64
	Period time.Duration
	Burst  int64
	// Adaptive makes MaxInFlight the ceiling of a live cap, lowered when a
	// handler reports throttling (worker.PauseAccount): halved, but not
	// below the account's other calls still in flight (the provider serves
	// that many), by at least one, never below 1; grown by one after
	// GrowAfter successes (default 10). It settles at the provider's limit
	// and one above it; a larger GrowAfter probes above it less often.
	Adaptive  bool
	GrowAfter int64
	// Fair, on a connector (an empty account key), puts every account of
	// the connector under flow control: claims share their limit among the
	// accounts with due work, round-robin, so a small account's operation
	// waits for a few claims, never for a big account's backlog. An
	// account with a limit is claimed fairly whether or not its connector
	// sets Fair.
	Fair bool
	// Ordered, on a connector, claims the operations of one document (same
	// document id) one at a time, in record order: an operation is leased
	// only when no earlier operation of its document is still attempted
	// (due, in backoff or leased). Operations without a document stay
	// unordered. When the earlier one dies, or is cancelled, the next one
	// goes ahead: a dead operation is left for triage, not a wall in front
	// of its document's later updates (requeued, it runs after them).
	// Records of one document take a lock of it to their transaction's
	// end on PostgreSQL, so that record order is commit order.
	Ordered bool
}

// SetAccountLimits sets the limits of an account or, with an empty
// AccountKey, of a connector, and puts the account (every account of the
// connector, when Fair) under flow control: every instance's next claim
// obeys them. Operations of the account recorded before are brought under
// control as claims reach them, oldest first; leases taken before finish
// as they were. Bad limits are ErrInvalidInput naming the field, and
// change nothing.
func (r *Repository) SetAccountLimits(ctx context.Context, k AccountKey, l AccountLimits) (err error) {
	ctx, end := r.start(ctx, "SetAccountLimits")
	defer end(&err)
	if err := k.validate(); err != nil {
		return fmt.Errorf("set account limits: %w", err)
	}
	if err := flow.Limits(l).Validate(k.AccountKey == ""); err != nil {
		return fmt.Errorf("set account limits of %s: %w: %w", k, ErrInvalidInput, err)
	}
	row := models.FlowAccount{ConnectorName: k.ConnectorName, AccountKey: k.AccountKey, Adaptive: l.Adaptive, Fair: l.Fair, Ordered: l.Ordered,
		EligibleAt: r.nowMillis(), UpdatedAt: r.nowMillis()}
	row.MaxInFlight, row.Rate, row.Burst, row.GrowAfter = optInt(l.MaxInFlight), optInt(l.Rate), optInt(l.Burst), optInt(l.GrowAfter)
	if l.Rate > 0 {
		row.PeriodMillis = optInt(l.Period.Milliseconds())
	}
	if l.Adaptive {
		row.LiveCap = optInt(l.MaxInFlight)
	}
	err = flow.SetLimits(r.base(ctx), row)
	if err != nil {
		return fmt.Errorf("set account limits of %s: %w", k, err)
	}
	return nil
}

// PauseAccount pauses an account (or, with an empty AccountKey, a whole
// connector) until until, a time after now: no instance claims its
// operations until then. A pause already running longer is kept. The
// account comes under flow control if it was not.
func (r *Repository) PauseAccount(ctx context.Context, k AccountKey, until time.Time) (err error) {
	ctx, end := r.start(ctx, "PauseAccount")
	defer end(&err)
	if err := k.validate(); err != nil {
		return fmt.Errorf("pause account: %w", err)
	}
	if !until.After(r.now()) {
		return fmt.Errorf("pause account %s: %w", k, invalid("until %v is not after now", until))
	}
	return r.pause(ctx, k, until.UnixMilli(), false)
}

// pause writes a pause of k until (epoch ms); throttled also lowers an
// adaptive account's live cap (flow.Pause says how).
func (r *Repository) pause(ctx context.Context, k AccountKey, until int64, throttled bool) error {
	var others int64
	if throttled {
		// The calls the provider is still serving: an adaptive cap is not
		// lowered below them.
		n, err := flow.InFlight(r.base(ctx), flow.Key(k), r.leaseNow())
		if err != nil {
			return fmt.Errorf("pause account %s: %w", k, err)
		}
		others = n
	}
	if err := flow.Pause(r.base(ctx), flow.Key(k), until, r.nowMillis(), throttled, others); err != nil {
		return fmt.Errorf("pause account %s: %w", k, err)
	}
	// The connector, not the account: a metric's attributes must stay few.
	r.emit(ctx, EventAccountPaused, 1, k.ConnectorName)
	r.log.InfoContext(ctx, "connstore: account paused", "account", k.String(), "until", time.UnixMilli(until).UTC())
	return nil
}

// ResumeAccount ends an account's (or connector's) pause now; claims serve
// it from their next round. An account under no flow control, or not
// paused, is ErrInvalidInput.
func (r *Repository) ResumeAccount(ctx context.Context, k AccountKey) (err error) {
	ctx, end := r.start(ctx, "ResumeAccount")
	defer end(&err)
	if err := k.validate(); err != nil {
		return fmt.Errorf("resume account: %w", err)
	}
	paused, err := flow.Resume(r.base(ctx), flow.Key(k), r.nowMillis())
	if err != nil {
		return fmt.Errorf("resume account %s: %w", k, err)
	}
	if !paused {
		return fmt.Errorf("resume account %s: %w", k, invalid("account %s is not paused", k))
	}
	r.emit(ctx, EventAccountResumed, 1, k.ConnectorName)
	r.log.InfoContext(ctx, "connstore: account resumed", "account", k.String())
	return nil
}

// AccountStatus is an account's limits and state, as ListAccounts reads them.
type AccountStatus struct {
	AccountKey
	Limits AccountLimits
	// PausedUntil is when its pause ends; zero when it is not paused.
	PausedUntil time.Time
	// LiveCap is an adaptive account's current cap (0 otherwise).
	LiveCap int64
	// InFlight is how many of its operations are leased now.
	InFlight int64
	// EligibleAt is when a claim next looks at it.
	EligibleAt time.Time
}

// ListAccountsParams pages through the accounts under flow control in
// key order.
type ListAccountsParams struct {
	// ConnectorName narrows to one connector; PausedOnly to paused ones.
	ConnectorName string
	PausedOnly    bool
	// After resumes after this key; Limit is the page size (1–1,000).
	After *AccountKey
	Limit int
}

// ListAccounts returns a page of the accounts and connectors under flow
// control with their limits and state: a keyset page of the flow table's
// key, each account's live leases counted from the flow lease index.
func (r *Repository) ListAccounts(ctx context.Context, p ListAccountsParams) (_ []AccountStatus, err error) {
	ctx, end := r.start(ctx, "ListAccounts")
	defer end(&err)
	if p.Limit <= 0 || p.Limit > 1000 {
		return nil, fmt.Errorf("list accounts: %w", invalid("limit %d must be 1–1000", p.Limit))
	}
	lp := flow.ListParams{ConnectorName: p.ConnectorName, After: (*flow.Key)(p.After), Limit: p.Limit}
	if p.PausedOnly {
		lp.PausedAt = r.nowMillis()
	}
	rows, err := flow.List(r.base(ctx), lp)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	keys := make([]flow.Key, len(rows))
	for i, row := range rows {
		keys[i] = flow.Key{ConnectorName: row.ConnectorName, AccountKey: row.AccountKey}
	}
	live, err := flow.InFlightOf(r.base(ctx), keys, r.leaseNow())
	if err != nil {
		return nil, fmt.Errorf("list accounts: count in flight: %w", err)
	}
	out := make([]AccountStatus, len(rows))
	for i, row := range rows {
		st := AccountStatus{AccountKey: AccountKey{row.ConnectorName, row.AccountKey}, Limits: limitsOf(row),
			EligibleAt: time.UnixMilli(min(row.EligibleAt, flow.Never/1000))}
		if row.PausedUntil != nil && *row.PausedUntil > r.nowMillis() {
			st.PausedUntil = time.UnixMilli(*row.PausedUntil)
		}
		if row.Adaptive && row.LiveCap != nil {
			st.LiveCap = *row.LiveCap
		}
		st.InFlight = live[keys[i]]
		out[i] = st
	}
	return out, nil
}

// limitsOf reads a flow row's limits.
func limitsOf(row models.FlowAccount) AccountLimits {
	l := AccountLimits{Adaptive: row.Adaptive, Fair: row.Fair, Ordered: row.Ordered}
	l.MaxInFlight, l.Rate, l.Burst, l.GrowAfter = deref(row.MaxInFlight), deref(row.Rate), deref(row.Burst), deref(row.GrowAfter)
	l.Period = time.Duration(deref(row.PeriodMillis)) * time.Millisecond
	return l
}

func optInt(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func deref(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
