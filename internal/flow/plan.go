package flow

import (
	"math"

	"github.com/connstore/connstore/models"
)

// Never is the eligible_at of an account with nothing a claim could lease
// until a write brings it work or frees a slot.
const Never int64 = math.MaxInt64 / 4

// ConnectorRecheck is how long an account held back only by its
// connector's cap waits before a claim looks at it again (ms): a finish
// wakes its own account, not every account of the connector, so the others
// are looked at again this often while the connector is at its cap.
const ConnectorRecheck = 100

// Account is one account a claim serves: its row and what the claim counted.
type Account struct {
	Row models.FlowAccount
	// Live is its live leases; LiveMinDue the earliest due time (its lease's
	// expiry by the application's clock) among them, 0 when none.
	Live, LiveMinDue int64
	// Allow is how many the claim may lease of it this pass; Got how many it
	// leased over the claim's passes, Units what they weigh (the units of
	// its rate spent).
	Allow, Got, Units int64
	// Want is the weight of the due row a pick left because the account's
	// or its connector's rate had no room for it yet (0 when none): the
	// account waits until both have.
	Want int64
	// Exhausted is set when a pick returned fewer rows than allowed: the
	// account has no more due rows now. NextDue is then the earliest due
	// time of its other attempted rows (0 when it has none).
	Exhausted bool
	NextDue   int64
}

// Connector is the connector row above a claim's accounts, with its count.
type Connector struct {
	Row              models.FlowAccount
	Live, LiveMinDue int64
	// Got is the operations its accounts leased or are allowed this pass,
	// Units what they weigh (an allowed one counted as 1 until leased).
	Got, Units int64
	// Want is the weight the hold's account waits for, when this claim set
	// the hold (0 otherwise); HoldChanged is set when the claim set or
	// cleared the row's hold, for the claim to write.
	Want        int64
	HoldChanged bool
}

// HoldGrace is how long past the moment its connector's rate has room a
// hold lasts (ms): time for the holding account's claim to come. A hold
// its account never uses (its operation cancelled, the account paused)
// lapses then, and the other accounts go on.
const HoldGrace = 1000

// holder is the account c's rate is kept for at nowMs, if any.
func holder(c *Connector, nowMs int64) (string, bool) {
	r := &c.Row
	if r.HoldAccount == nil || r.HoldUntil == nil || *r.HoldUntil <= nowMs {
		return "", false
	}
	return *r.HoldAccount, true
}

// heldFrom reports whether c's rate is kept for another account than a at
// nowMs: a is then not served from it this claim, and looks again when the
// hold ends.
func heldFrom(c *Connector, a *Account, nowMs int64) bool {
	k, held := holder(c, nowMs)
	return held && k != a.Row.AccountKey
}

// limitsOf reads a row's limits.
func limitsOf(r *models.FlowAccount) (capN, rate, periodMs, burst int64) {
	if r.MaxInFlight != nil {
		capN = *r.MaxInFlight
		if r.Adaptive && r.LiveCap != nil {
			capN = min(capN, *r.LiveCap)
		}
	}
	if r.Rate != nil && r.PeriodMillis != nil {
		rate, periodMs = *r.Rate, *r.PeriodMillis
		burst = 1
		if r.Burst != nil && *r.Burst > 0 {
			burst = *r.Burst
		}
	}
	return capN, rate, periodMs, burst
}

// room is how many more a row's limits allow now: its cap less its live
// and newly leased (got), and its rate's tokens less the units spent.
func room(r *models.FlowAccount, live, got, units, nowUs int64) int64 {
	n := int64(1) << 40
	capN, rate, periodMs, burst := limitsOf(r)
	if capN > 0 {
		n = min(n, capN-live-got)
	}
	if rate > 0 {
		n = min(n, Allowed(r.TatMicros, nowUs, Interval(rate, periodMs), burst)-units)
	}
	if r.PausedUntil != nil && *r.PausedUntil > nowUs/1000 {
		n = 0
	}
	return max(n, 0)
}

// Share sets each account's Allow for one pass of a claim of limit rows:
// the limit shared out (round-robin: as many accounts as possible get one
// more, in the order given, the longest waiting first), within each
// account's room and its connector's. It returns the total allowed.
func Share(accounts []*Account, conns map[string]*Connector, limit, nowUs int64) int64 {
	var total int64
	for i := range accounts {
		accounts[i].Allow = 0
	}
	for total < limit {
		progressed := false
		for _, a := range accounts {
			if total >= limit {
				break
			}
			if a.Exhausted || a.Want > 0 || room(&a.Row, a.Live, a.Got+a.Allow, a.Units+a.Allow, nowUs) <= 0 {
				continue
			}
			if c := conns[a.Row.ConnectorName]; c != nil && (heldFrom(c, a, nowUs/1000) || room(&c.Row, c.Live, c.Got, c.Units, nowUs) <= 0) {
				continue
			}
			a.Allow++
			total++
			if c := conns[a.Row.ConnectorName]; c != nil {
				c.Got++ // reserved, one unit each; Fit puts back what was not leased
				c.Units++
			}
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return total
}

// Fit takes, of the due rows a pick returned for an account (their
// weights, oldest first, at most a.Allow), the longest prefix its rate
// and its connector's have room for, records it, and returns how many. The
// connector's reservation for the account (one unit per allowed row) is
// given back first, so accounts fitted one after another never spend more
// of the connector's rate than it has. A row heavier than its limiter's
// burst fits only when the limiter is full and nothing was taken of it in
// this claim (it then overdraws, and the account waits the overdraft out):
// never fitting it would wedge the account. A row left for want of room
// stops the account's pick (an account's rows start oldest first) and is
// remembered in Want, for After's next look. A row left for want of its
// connector's room (not its account's) puts a hold on the connector for
// the account, unless another account holds it: until the room comes, the
// other accounts do not spend the connector's rate (Share skips them), or
// their steady backlog would take every unit it waits for. The hold ends
// when the account's row fits, or HoldGrace after the room came.
func Fit(a *Account, c *Connector, weights []int64, nowUs int64) int64 {
	if c != nil {
		c.Got -= a.Allow
		c.Units -= a.Allow
	}
	returned := int64(len(weights))
	var got, units int64
	blockedByConnector := false
	for _, w := range weights {
		w = Units(w)
		if !rateFits(&a.Row, a.Units+units, w, nowUs) {
			a.Want = w
			break
		}
		if c != nil && !rateFits(&c.Row, c.Units+units, w, nowUs) {
			a.Want, blockedByConnector = w, true
			break
		}
		got++
		units += w
	}
	if c != nil {
		c.Got += got
		c.Units += units
		k, held := holder(c, nowUs/1000)
		mine := held && k == a.Row.AccountKey
		switch {
		case blockedByConnector && (!held || mine):
			// Dated for now to the claim's end at the earliest, so the
			// claim's later passes and accounts see it; SetHolds dates it
			// once the claim's spend is known.
			key, until := a.Row.AccountKey, nowUs/1000+HoldGrace
			c.Row.HoldAccount, c.Row.HoldUntil, c.Want, c.HoldChanged = &key, &until, a.Want, true
		case mine && !blockedByConnector && got > 0:
			c.Row.HoldAccount, c.Row.HoldUntil, c.Want, c.HoldChanged = nil, nil, 0, true
		}
	}
	if returned < a.Allow {
		a.Exhausted = true
	}
	a.Got += got
	a.Units += units
	a.Allow = 0
	return got
}

// Units is what an operation of weight w spends of a rate: its weight, 1
// for none (0, or a negative one an application wrote itself), at most
// MaxWeight. A claim spends it and a release gives the same back.
func Units(w int64) int64 { return min(max(w, 1), MaxWeight) }

// SetHolds dates the holds the claim set (HoldUntil), once its spend is
// known and before After reads them.
func SetHolds(conns map[string]*Connector, nowMs int64) {
	for _, c := range conns {
		if c.HoldChanged && c.Want > 0 {
			until := HoldUntil(c, nowMs)
			c.Row.HoldUntil = &until
		}
	}
}

// HoldUntil is when the hold c's claim set ends (epoch ms): HoldGrace
// after its rate, once the claim's spend is counted, has room for the
// weight waited for.
func HoldUntil(c *Connector, nowMs int64) int64 {
	_, rate, periodMs, burst := limitsOf(&c.Row)
	if rate <= 0 {
		return nowMs
	}
	t := Interval(rate, periodMs)
	return ceilDiv(ReadyFor(ConnectorTat(c, nowMs), t, burst, c.Want), 1000) + HoldGrace
}

// rateFits reports whether a row's rate has room for w more units after
// spent were taken in this claim (always, with no rate).
func rateFits(r *models.FlowAccount, spent, w, nowUs int64) bool {
	_, rate, periodMs, burst := limitsOf(r)
	if rate <= 0 {
		return true
	}
	left := Allowed(r.TatMicros, nowUs, Interval(rate, periodMs), burst) - spent
	if w > burst {
		return spent == 0 && left >= burst
	}
	return left >= w
}

// After is an account's state once the claim is done: its rate's new tat
// and when a claim should look at it next. leaseDue is the due time of the
// claim's own leases (their expiry by the application's clock); narrowed
// is true for a claim that saw only some of the account's rows (an owner,
// a repository's scopes), which must not judge the account out of work.
func After(a *Account, c *Connector, nowMs, leaseDue int64, narrowed bool) (tat, eligible int64) {
	r := &a.Row
	nowUs := nowMs * 1000
	capN, rate, periodMs, burst := limitsOf(r)
	tat = r.TatMicros
	eligible = nowMs
	need := max(a.Want, 1)
	if rate > 0 {
		t := Interval(rate, periodMs)
		tat = Take(tat, nowUs, t, a.Units)
		if Allowed(tat, nowUs, t, burst) < min(need, burst) {
			eligible = max(eligible, ceilDiv(ReadyFor(tat, t, burst, need), 1000))
		}
	}
	if capN > 0 && a.Live+a.Got >= capN {
		due := a.LiveMinDue
		if a.Got > 0 && (due == 0 || leaseDue < due) {
			due = leaseDue
		}
		if due == 0 {
			due = Never
		}
		eligible = max(eligible, due)
	}
	if c != nil {
		ccap, crate, cperiod, cburst := limitsOf(&c.Row)
		if crate > 0 {
			t := Interval(crate, cperiod)
			if ctat := Take(c.Row.TatMicros, nowUs, t, c.Units); Allowed(ctat, nowUs, t, cburst) < min(need, cburst) {
				eligible = max(eligible, ceilDiv(ReadyFor(ctat, t, cburst, need), 1000))
			}
		}
		if ccap > 0 && c.Live+c.Got >= ccap {
			eligible = max(eligible, nowMs+ConnectorRecheck)
		}
		if heldFrom(c, a, nowMs) && a.Got == 0 {
			eligible = max(eligible, *c.Row.HoldUntil)
		}
	}
	if a.Exhausted && !narrowed {
		next := a.NextDue
		if next == 0 {
			next = Never
		}
		eligible = max(eligible, next)
	}
	if r.PausedUntil != nil {
		eligible = max(eligible, *r.PausedUntil)
	}
	return tat, eligible
}

// ConnectorTat is a connector's tat once the claim is done.
func ConnectorTat(c *Connector, nowMs int64) int64 {
	_, rate, periodMs, _ := limitsOf(&c.Row)
	if rate <= 0 {
		return c.Row.TatMicros
	}
	return Take(c.Row.TatMicros, nowMs*1000, Interval(rate, periodMs), c.Units)
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return a / b
	}
	return (a + b - 1) / b
}
