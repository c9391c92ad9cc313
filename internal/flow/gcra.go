package flow

// The rate limit is GCRA (the generic cell rate algorithm), chosen over a
// token bucket because its whole state is one number, the theoretical
// arrival time (TAT), which a claim reads and writes in the account's row
// under the row's lock: no refill timer, no second column to keep in step,
// and the same arithmetic gives how many starts are allowed now and when
// the next one is. An account of rate r per period p has an emission
// interval T = p/r; with a burst of b it may start whenever TAT - now ≤
// (b-1)·T after the start, so at most b at once and r per p over time (in
// any window of length w, at most b + w/T starts).
//
// Times are in microseconds, T rounded up, so the long-run rate never
// exceeds r/p.

// Interval is the emission interval in microseconds of rate starts per
// periodMillis, rounded up.
func Interval(rate, periodMillis int64) int64 {
	if rate <= 0 {
		return 0
	}
	us := periodMillis * 1000
	return (us + rate - 1) / rate
}

// Allowed is how many unit-cost starts the limiter allows at now, given its
// tat, interval t and burst.
func Allowed(tat, now, t, burst int64) int64 {
	if t <= 0 {
		return 1 << 40
	}
	room := now + burst*t - max(tat, now)
	if room < t {
		return 0
	}
	return room / t
}

// Take is the tat after n units start at now.
func Take(tat, now, t, n int64) int64 {
	if t <= 0 || n <= 0 {
		return tat
	}
	return max(tat, now) + n*t
}

// Refund is the tat after n units taken earlier are given back unstarted
// (never before now: unused room does not accumulate past the burst).
func Refund(tat, now, t, n int64) int64 {
	if t <= 0 || n <= 0 {
		return tat
	}
	return max(tat-n*t, now)
}

// ReadyFor is the earliest time the limiter has room for need units
// starting at once (need above the burst waits for a full limiter).
func ReadyFor(tat, t, burst, need int64) int64 {
	return tat - (burst-min(need, burst))*t
}
