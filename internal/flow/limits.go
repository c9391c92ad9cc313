package flow

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is the package's refusal of a limit; the repository reports
// it as its ErrInvalidInput.
var ErrInvalid = errors.New("invalid flow limit")

// Limits are an account's (or a connector's) configured limits; a zero
// field is no limit of that kind.
type Limits struct {
	// MaxInFlight caps live leases at once (at least 1 when set).
	MaxInFlight int64
	// Rate starts per Period, at most Burst at once (Burst defaults to 1 and
	// may not exceed Rate: a burst above the rate would let one period see
	// more starts than the provider allows in it).
	Rate   int64
	Period time.Duration
	Burst  int64
	// Adaptive makes MaxInFlight the ceiling of a live cap: halved (never
	// below 1) when a handler reports the provider's throttling, grown by
	// one after GrowAfter successes (default 10).
	Adaptive  bool
	GrowAfter int64
	// Fair, on a connector (an empty account key), brings every account of
	// the connector under flow control, so that claims share their limit
	// among the accounts with due work even with no limit of their own.
	Fair bool
	// Ordered, on a connector, claims each document's operations one at a
	// time in record order (and brings every account under flow control).
	Ordered bool
}

// DefaultGrowAfter is how many successes grow an adaptive cap by one.
const DefaultGrowAfter = 10

// Validate checks l for an account (connector false) or a connector; every
// problem names its field.
func (l Limits) Validate(connector bool) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if l.MaxInFlight < 0 {
		bad("MaxInFlight %d must be positive (0 for no cap)", l.MaxInFlight)
	}
	switch {
	case l.Rate < 0:
		bad("Rate %d must be positive (0 for no rate limit)", l.Rate)
	case l.Rate == 0 && (l.Period != 0 || l.Burst != 0):
		bad("Period and Burst need a Rate")
	case l.Rate > 0 && l.Period <= 0:
		bad("Period %v must be positive", l.Period)
	case l.Rate > 0 && l.Period%time.Millisecond != 0:
		bad("Period %v must be whole milliseconds", l.Period)
	case l.Period > MaxPeriod:
		bad("Period %v must be at most %v", l.Period, MaxPeriod)
	case l.Burst < 0:
		bad("Burst %d must be positive", l.Burst)
	case l.Burst > l.Rate:
		bad("Burst %d exceeds Rate %d", l.Burst, l.Rate)
	}
	if l.Adaptive && l.MaxInFlight == 0 {
		bad("Adaptive needs MaxInFlight, its ceiling")
	}
	if l.GrowAfter < 0 || (l.GrowAfter > 0 && !l.Adaptive) {
		bad("GrowAfter %d needs Adaptive and must be positive", l.GrowAfter)
	}
	if l.Fair && !connector {
		bad("Fair is a connector's setting (an empty account key)")
	}
	if l.Ordered && !connector {
		bad("Ordered is a connector's setting (an empty account key)")
	}
	return errors.Join(errs...)
}

// BurstOrDefault is the burst a rate limit allows: 1 unless set.
func (l Limits) BurstOrDefault() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return 1
}

// MaxWeight is the most an operation may weigh: far above any API's cost
// of one call, low enough that a weight times the emission interval of any
// rate (at most MaxPeriod for one start) stays far from overflowing the
// limiter's microseconds: 10^6 × 31 days in µs is 2.7·10^18 < 9.2·10^18.
const MaxWeight = 1_000_000

// MaxPeriod is the longest rate period: a month, past any provider's
// quota window.
const MaxPeriod = 31 * 24 * time.Hour
