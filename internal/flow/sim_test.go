package flow

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"

	"github.com/connstore/connstore/models"
)

// sim is an in-memory model of Claim (claim.go): the accounts read in
// eligible order up to the limit, three passes of Share and pick+Fit, the
// next due time, SetHolds, After and the connector's tat and hold written
// back. Leased operations finish at once.

type simRow struct {
	due, weight int64
	done        bool
}

type simAcct struct {
	row  models.FlowAccount
	rows []*simRow
	// hidden: rows a narrowed claim does not see
	hidden bool
}

type start struct{ us, units int64 }

type sim struct {
	accts    []*simAcct
	conn     *models.FlowAccount // nil: none
	narrowed bool
	starts   map[string][]start // by account key, "" for connector
	claims   int
}

func (s *sim) claim(nowMs int64, limit int) int {
	s.claims++
	nowUs := nowMs * 1000
	var elig []*simAcct
	for _, a := range s.accts {
		if a.row.EligibleAt <= nowMs {
			elig = append(elig, a)
		}
	}
	slices.SortStableFunc(elig, func(x, y *simAcct) int {
		return cmp.Or(cmp.Compare(x.row.EligibleAt, y.row.EligibleAt), cmp.Compare(x.row.ConnectorName, y.row.ConnectorName),
			cmp.Compare(x.row.AccountKey, y.row.AccountKey))
	})
	if len(elig) > limit {
		elig = elig[:limit]
	}
	if len(elig) == 0 {
		return 0
	}
	conns := map[string]*Connector{}
	var c *Connector
	if s.conn != nil {
		c = &Connector{Row: *s.conn}
		conns[s.conn.ConnectorName] = c
	}
	accounts := make([]*Account, len(elig))
	for i, a := range elig {
		accounts[i] = &Account{Row: a.row}
	}
	leased := 0
	for pass := 0; pass < 3 && leased < limit; pass++ {
		if Share(accounts, conns, int64(limit-leased), nowUs) == 0 {
			break
		}
		for i, a := range accounts {
			if a.Allow == 0 {
				continue
			}
			var mine []*simRow
			if !(s.narrowed && elig[i].hidden) {
				for _, r := range elig[i].rows {
					if !r.done && r.due <= nowMs && int64(len(mine)) < a.Allow {
						mine = append(mine, r)
					}
				}
			}
			ws := make([]int64, len(mine))
			for j, r := range mine {
				ws[j] = r.weight
			}
			n := Fit(a, conns[a.Row.ConnectorName], ws, nowUs)
			for _, r := range mine[:n] {
				r.done = true // leased and finished at once (no caps here)
				u := max(r.weight, 1)
				s.starts[elig[i].row.AccountKey] = append(s.starts[elig[i].row.AccountKey], start{nowUs, u})
				if c != nil {
					s.starts[""] = append(s.starts[""], start{nowUs, u})
				}
				leased++
			}
		}
	}
	// nextDue
	if !s.narrowed {
		for i, a := range accounts {
			if !a.Exhausted && a.Got > 0 {
				continue
			}
			a.Exhausted = a.Exhausted || a.Got == 0
			a.NextDue = 0
			for _, r := range elig[i].rows {
				if !r.done && (a.NextDue == 0 || r.due < a.NextDue) {
					a.NextDue = r.due
				}
			}
		}
	}
	SetHolds(conns, nowMs)
	for i, a := range accounts {
		tat, e := After(a, conns[a.Row.ConnectorName], nowMs, nowMs+60_000, s.narrowed)
		elig[i].row.TatMicros, elig[i].row.EligibleAt = tat, e
	}
	if c != nil && c.Got > 0 {
		s.conn.TatMicros = ConnectorTat(c, nowMs)
	}
	if c != nil && c.HoldChanged {
		s.conn.HoldAccount, s.conn.HoldUntil = c.Row.HoldAccount, c.Row.HoldUntil
	}
	return leased
}

func rated(name string, rate, periodMs, burst int64) models.FlowAccount {
	return models.FlowAccount{ConnectorName: "c", AccountKey: name, Rate: i64(rate), PeriodMillis: i64(periodMs), Burst: i64(burst)}
}

// checkWindows: in every window [s, s+L) the units started are at most
// burst + ceil(L/T) (+ the heavy op's weight over burst, once, when it is
// the window's first start).
func checkWindows(t *testing.T, name string, st []start, rate, periodMs, burst int64) {
	T := Interval(rate, periodMs)
	for _, L := range []int64{T, 10 * T, periodMs * 1000, 5 * periodMs * 1000} {
		for i := range st {
			var sum, heavy int64
			for j := i; j < len(st) && st[j].us < st[i].us+L; j++ {
				sum += st[j].units
				if st[j].units > burst {
					heavy = max(heavy, st[j].units-burst)
				}
			}
			limit := burst + (L+T-1)/T + heavy
			if sum > limit {
				t.Errorf("%s: window %d µs at %d µs: %d units > %d", name, L, st[i].us, sum, limit)
				return
			}
		}
	}
}

// TestSimRatesHoldAndEveryOpRuns: random weights, several accounts, account and connector rates,
// claims every few ms: neither rate is exceeded; every op eventually runs.
func TestSimRatesHoldAndEveryOpRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 30; trial++ {
		s := &sim{starts: map[string][]start{}}
		cb := int64(1 + rng.Intn(10))
		conn := rated("", cb+int64(rng.Intn(20)), 1000, cb)
		s.conn = &conn
		n := 1 + rng.Intn(4)
		for k := 0; k < n; k++ {
			b := int64(1 + rng.Intn(8))
			a := &simAcct{row: rated(string(rune('a'+k)), b+int64(rng.Intn(10)), 1000, b)}
			for j := 0; j < 40; j++ {
				a.rows = append(a.rows, &simRow{due: 1 + int64(rng.Intn(3000)), weight: int64(rng.Intn(12)) - 1})
			}
			s.accts = append(s.accts, a)
		}
		for now := int64(1); now < 200_000; now += int64(1 + rng.Intn(20)) {
			s.claim(now, 1+rng.Intn(10))
		}
		checkWindows(t, "connector", s.starts[""], *conn.Rate, 1000, cb)
		for _, a := range s.accts {
			checkWindows(t, "account "+a.row.AccountKey, s.starts[a.row.AccountKey], *a.row.Rate, 1000, *a.row.Burst)
			for _, r := range a.rows {
				if !r.done {
					t.Errorf("trial %d: account %s row weight %d due %d never ran (conn burst %d)", trial, a.row.AccountKey, r.weight, r.due, cb)
					break
				}
			}
		}
	}
}

// TestSimSiblingBacklogDoesNotStarveAWeightedOp: an account's op of
// weight 2 to 8 under a connector rate (10/s, burst 5) that a sibling's
// backlog of 100,000 keeps busy, claims every 10 ms: it runs (the hold
// keeps the connector's rate for it); without the hold it never did.
func TestSimSiblingBacklogDoesNotStarveAWeightedOp(t *testing.T) {
	for _, own := range []bool{false, true} {
		for _, w := range []int64{2, 3, 5, 8} {
			s := &sim{starts: map[string][]start{}}
			conn := rated("", 10, 1000, 5) // 10/s, burst 5
			s.conn = &conn
			a := &simAcct{row: models.FlowAccount{ConnectorName: "c", AccountKey: "a"}}
			b := &simAcct{row: models.FlowAccount{ConnectorName: "c", AccountKey: "b"}}
			if own { // each account its own 10/s burst 10 as well
				a.row, b.row = rated("a", 10, 1000, 10), rated("b", 10, 1000, 10)
			}
			a.rows = []*simRow{{due: 5000, weight: w}}
			for j := 0; j < 100_000; j++ {
				b.rows = append(b.rows, &simRow{due: 1, weight: 1})
			}
			s.accts = []*simAcct{a, b}
			aLooks := 0
			for now := int64(1); now < 600_000; now += 10 { // 10 minutes
				if a.row.EligibleAt <= now {
					aLooks++
				}
				s.claim(now, 10)
				if a.rows[0].done {
					break
				}
			}
			if !a.rows[0].done {
				t.Errorf("own limits %v, weight %d: a's op never ran in 10 min; claims that read a: %d; b started %d units",
					own, w, aLooks, len(s.starts["b"]))
			}
		}
	}
}

// TestMaxWeightAtMaxPeriodDoesNotOverflow: the heaviest weight at the
// longest period moves the tat forward, never past int64; a longer period
// is refused.
func TestMaxWeightAtMaxPeriodDoesNotOverflow(t *testing.T) {
	day := int64(86_400_000)
	for _, periodMs := range []int64{30 * day, MaxPeriod.Milliseconds()} {
		nowUs := int64(1_800_000_000_000_000) // 2027 in µs
		a := &Account{Row: rated("a", 1, periodMs, 1), Allow: 1}
		a.Row.TatMicros = nowUs
		got := Fit(a, nil, []int64{MaxWeight}, nowUs)
		tat, eligible := After(a, nil, nowUs/1000, nowUs/1000+60_000, false)
		if tat < nowUs {
			t.Errorf("period %d days: got %d, tat after a MaxWeight op is %d (< now %d): overflowed, eligible %d, Allowed now %d",
				periodMs/day, got, tat, nowUs, eligible, Allowed(tat, nowUs, Interval(1, periodMs), 1))
		}
	}
}

// TestRefundUndoesTake: a refund after a take of any weight returns the
// limiter to where it was.
func TestRefundUndoesTake(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 10000; i++ {
		T := int64(1 + rng.Intn(100000))
		now := int64(rng.Intn(1 << 30))
		tat := now + int64(rng.Intn(1<<20)) - 1<<19
		n := int64(1 + rng.Intn(MaxWeight))
		if got := Refund(Take(tat, now, T, n), now, T, n); got != max(tat, now) {
			t.Fatalf("refund(take) %d != %d", got, max(tat, now))
		}
	}
}

// TestSimNarrowedClaimServesAHeavyOp: in a narrowed claim a sibling whose
// rows the claim does not see is allowed every claim; an op heavier than
// the connector's burst still runs.
func TestSimNarrowedClaimServesAHeavyOp(t *testing.T) {
	s := &sim{starts: map[string][]start{}, narrowed: true}
	conn := rated("", 10, 1000, 5)
	s.conn = &conn
	a := &simAcct{row: models.FlowAccount{ConnectorName: "c", AccountKey: "a"}, rows: []*simRow{{due: 1, weight: 8}}}
	b := &simAcct{row: models.FlowAccount{ConnectorName: "c", AccountKey: "b"}, hidden: true,
		rows: []*simRow{{due: 1, weight: 1}}}
	s.accts = []*simAcct{a, b}
	for now := int64(1); now < 60_000; now += 10 {
		s.claim(now, 10)
	}
	if !a.rows[0].done {
		t.Errorf("narrowed: a's weight-8 op never ran in 60 s; %d claims, a eligible_at %d", s.claims, a.row.EligibleAt)
	}
}

// TestRawWeightIsClamped: a weight an application wrote above MaxWeight
// (by its own SQL) counts as MaxWeight: the tat never overflows.
func TestRawWeightIsClamped(t *testing.T) {
	nowUs := int64(1_800_000_000_000_000)
	a := &Account{Row: rated("a", 1, 1000, 1), Allow: 1}
	a.Row.TatMicros = nowUs
	Fit(a, nil, []int64{10_000_000_000_000}, nowUs)
	tat, _ := After(a, nil, nowUs/1000, 0, false)
	if tat < nowUs {
		t.Errorf("raw weight 1e13 on 1/s: tat %d < now: overflowed, limiter open (Allowed %d)", tat, Allowed(tat, nowUs, Interval(1, 1000), 1))
	}
}
