package flow

import (
	"errors"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

func i64(v int64) *int64 { return &v }

// TestGCRANeverExceedsBurstPlusRate: starting as often as the limiter
// allows, every window of one period sees at most burst + rate starts, and
// the long-run rate is the limit's (within one start).
func TestGCRANeverExceedsBurstPlusRate(t *testing.T) {
	for _, tc := range []struct{ rate, periodMs, burst int64 }{{20, 1000, 5}, {3, 1000, 1}, {1000, 1000, 1000}, {7, 60000, 2}} {
		T := Interval(tc.rate, tc.periodMs)
		var tat int64
		var starts []int64 // µs
		for now := int64(0); now < 10*tc.periodMs*1000; now += 997 {
			n := Allowed(tat, now, T, tc.burst)
			for range n {
				starts = append(starts, now)
			}
			tat = Take(tat, now, T, n)
		}
		window := tc.periodMs * 1000
		for i := range starts {
			j := i
			for j < len(starts) && starts[j] < starts[i]+window {
				j++
			}
			require.LessOrEqual(t, int64(j-i), tc.burst+tc.rate, "%+v: window at %d µs", tc, starts[i])
		}
		require.InDelta(t, float64(10*tc.rate+tc.burst), float64(len(starts)), float64(tc.rate)/10+1, "%+v", tc)
	}
}

// TestGCRARefundAndReadyAt: a start given back is allowed again at once;
// ReadyFor is the first time Allowed reaches the units asked for, a full
// limiter for more than the burst.
func TestGCRARefundAndReadyAt(t *testing.T) {
	T := Interval(20, 1000) // 50 ms
	tat := Take(0, 0, T, 5)
	require.Zero(t, Allowed(tat, 0, T, 5))
	ready := ReadyFor(tat, T, 5, 1)
	require.Equal(t, int64(50_000), ready)
	require.Zero(t, Allowed(tat, ready-1, T, 5))
	require.Equal(t, int64(1), Allowed(tat, ready, T, 5))
	require.Equal(t, int64(1), Allowed(Refund(tat, 0, T, 1), 0, T, 5))
	require.Equal(t, int64(10), Refund(tat, 10, T, 100), "never before now")
	require.Equal(t, int64(3), Allowed(tat, ReadyFor(tat, T, 5, 3), T, 5))
	require.Less(t, Allowed(tat, ReadyFor(tat, T, 5, 3)-1, T, 5), int64(3))
	require.Equal(t, tat, ReadyFor(tat, T, 5, 9), "more than the burst waits for a full limiter")
	require.Equal(t, int64(5), Allowed(tat, tat, T, 5))
}

// TestShareIsRoundRobinWithinLimits: a claim's limit goes one at a time to
// each account in order, within each account's cap, rate and pause and its
// connector's cap.
func TestShareIsRoundRobinWithinLimits(t *testing.T) {
	now := int64(1_000_000)
	acct := func(name string, mut func(*models.FlowAccount)) *Account {
		a := &Account{Row: models.FlowAccount{ConnectorName: "c", AccountKey: name}}
		if mut != nil {
			mut(&a.Row)
		}
		return a
	}
	big := acct("big", nil)
	capped := acct("capped", func(r *models.FlowAccount) { r.MaxInFlight = i64(3) })
	capped.Live = 2
	rated := acct("rated", func(r *models.FlowAccount) { r.Rate, r.PeriodMillis, r.Burst = i64(2), i64(1000), i64(2) })
	paused := acct("paused", func(r *models.FlowAccount) { r.PausedUntil = i64(now/1000 + 5) })
	small := acct("small", nil)
	accounts := []*Account{big, capped, rated, paused, small}
	require.Equal(t, int64(10), Share(accounts, nil, 10, now))
	require.Equal(t, []int64{4, 1, 2, 0, 3}, []int64{big.Allow, capped.Allow, rated.Allow, paused.Allow, small.Allow})

	// The connector's cap is shared by its accounts.
	conns := map[string]*Connector{"c": {Row: models.FlowAccount{ConnectorName: "c", MaxInFlight: i64(4)}, Live: 1}}
	require.Equal(t, int64(3), Share([]*Account{acct("a", nil), acct("b", nil)}, conns, 10, now))
}

// TestAfterSchedulesTheNextLook: an account's eligible_at after a claim is
// its pause's end, its next token, its earliest lease expiry at its cap, or
// its next due row when it ran out; now when it may have more.
func TestAfterSchedulesTheNextLook(t *testing.T) {
	now := int64(1_000_000)
	cases := []struct {
		name string
		a    Account
		want int64
	}{
		{"more due, room left", Account{Row: models.FlowAccount{}, Got: 5}, now},
		{"ran out of due rows", Account{Got: 2, Exhausted: true, NextDue: now + 700}, now + 700},
		{"nothing attempted left", Account{Got: 2, Exhausted: true}, Never},
		{"at its cap", Account{Row: models.FlowAccount{MaxInFlight: i64(2)}, Live: 1, LiveMinDue: now + 300, Got: 1}, now + 300},
		{"out of tokens", Account{Row: models.FlowAccount{Rate: i64(10), PeriodMillis: i64(1000), Burst: i64(1)}, Got: 1, Units: 1}, now + 100},
		{"a weight of 3 waits for 3 tokens", Account{Row: models.FlowAccount{Rate: i64(10), PeriodMillis: i64(1000), Burst: i64(5)},
			Got: 1, Units: 4, Want: 3}, now + 200},
		{"paused", Account{Row: models.FlowAccount{PausedUntil: i64(now + 2000)}}, now + 2000},
	}
	for _, tc := range cases {
		_, got := After(&tc.a, nil, now, now+60_000, false)
		require.Equal(t, tc.want, got, tc.name)
	}
	a := Account{Got: 2, Exhausted: true}
	_, got := After(&a, nil, now, now+60_000, true)
	require.Equal(t, now, got, "a narrowed claim does not judge the account out of work")
}

// TestFitSpendsRatesByWeight: a pick's rows are kept oldest first while
// the account's rate and its connector's have room for their weights; the
// first that does not fit stops the account; one heavier than the burst
// starts only on a full limiter, alone; accounts fitted one after another
// never spend more of their connector's rate than it has.
func TestFitSpendsRatesByWeight(t *testing.T) {
	nowUs := int64(1_000_000_000)
	rated := func(rate, burst int64) models.FlowAccount {
		return models.FlowAccount{Rate: i64(rate), PeriodMillis: i64(1000), Burst: i64(burst)}
	}
	cases := []struct {
		name      string
		row       models.FlowAccount
		allow     int64
		weights   []int64
		got, want int64
		exhausted bool
	}{
		{"no rate: all", models.FlowAccount{}, 3, []int64{5, 9, 1}, 3, 0, false},
		{"prefix within the burst", rated(10, 10), 4, []int64{3, 3, 3, 2}, 3, 2, false},
		{"a heavy row stops lighter ones behind it", rated(10, 10), 3, []int64{2, 9, 1}, 1, 9, false},
		{"heavier than the burst on a full limiter", rated(10, 5), 2, []int64{12, 1}, 1, 1, false},
		{"fewer rows than allowed: out of due work", rated(10, 10), 5, []int64{1, 1}, 2, 0, true},
		{"zero weight counts as one", rated(10, 2), 3, []int64{0, 0, 0}, 2, 1, false},
	}
	for _, tc := range cases {
		a := &Account{Row: tc.row, Allow: tc.allow}
		got := Fit(a, nil, tc.weights, nowUs)
		require.Equal(t, tc.got, got, tc.name)
		require.Equal(t, tc.got, a.Got, tc.name)
		require.Equal(t, tc.want, a.Want, tc.name)
		require.Equal(t, tc.exhausted, a.Exhausted, tc.name)
	}
	// Prefix: 3+3+3 = 9 of 10 units fit, the fourth row (1) does too.
	a := &Account{Row: rated(10, 10), Allow: 4}
	require.Equal(t, int64(4), Fit(a, nil, []int64{3, 3, 3, 1}, nowUs))
	require.Equal(t, int64(10), a.Units)

	// A heavy row after a light one in the same claim waits.
	h := &Account{Row: rated(10, 5), Allow: 2}
	require.Equal(t, int64(1), Fit(h, nil, []int64{1, 12}, nowUs))
	require.Equal(t, int64(12), h.Want)

	// The connector's rate (8 units) over two accounts allowed 4 rows each.
	c := &Connector{Row: rated(8, 8)}
	x, y := &Account{Allow: 4}, &Account{Allow: 4}
	c.Got, c.Units = 8, 8 // Share's reservations, one unit a row
	gx := Fit(x, c, []int64{2, 2, 2, 2}, nowUs)
	gy := Fit(y, c, []int64{2, 2, 2, 2}, nowUs)
	// x fits beside y's reservation (4 units), y then beside x's 4.
	require.Equal(t, []int64{2, 2}, []int64{gx, gy})
	require.Equal(t, int64(8), c.Units, "the connector spends what its rate has, no more")
	require.Equal(t, int64(4), c.Got)
}

// TestLimitsValidate: every bad limit is refused naming its field.
func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     Limits
		conn  bool
		field string
	}{
		{"negative cap", Limits{MaxInFlight: -1}, false, "MaxInFlight"},
		{"zero rate with period", Limits{Period: time.Second}, false, "Rate"},
		{"negative rate", Limits{Rate: -3, Period: time.Second}, false, "Rate"},
		{"no period", Limits{Rate: 5}, false, "Period"},
		{"negative period", Limits{Rate: 5, Period: -time.Second}, false, "Period"},
		{"sub-millisecond period", Limits{Rate: 5, Period: time.Microsecond}, false, "Period"},
		{"burst over rate", Limits{Rate: 5, Period: time.Second, Burst: 6}, false, "Burst"},
		{"period over a month", Limits{Rate: 1, Period: MaxPeriod + time.Millisecond}, false, "Period"},
		{"adaptive without cap", Limits{Adaptive: true}, false, "Adaptive"},
		{"grow without adaptive", Limits{MaxInFlight: 3, GrowAfter: 4}, false, "GrowAfter"},
		{"fair on an account", Limits{Fair: true}, false, "Fair"},
		{"ordered on an account", Limits{Ordered: true}, false, "Ordered"},
	} {
		err := tc.l.Validate(tc.conn)
		require.True(t, errors.Is(err, ErrInvalid), tc.name)
		require.ErrorContains(t, err, tc.field, tc.name)
	}
	require.NoError(t, Limits{MaxInFlight: 3, Rate: 20, Period: time.Second, Burst: 5, Adaptive: true, GrowAfter: 4}.Validate(false))
	require.NoError(t, Limits{Fair: true}.Validate(true))
}
