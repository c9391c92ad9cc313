package repository

import (
	"math"
	"math/rand/v2"
	"time"
)

// BackoffPolicy decides when a failed operation is re-driven, or that it is
// dead. attempts counts failures so far, including the one being recorded.
type BackoffPolicy interface {
	Next(attempts int64, kind string) (delay time.Duration, dead bool)
}

// ExponentialBackoff waits Base·2^(attempts-1), capped at Max, with up to
// ±Jitter of the delay added at random, and declares the operation dead once
// attempts reaches MaxAttempts (0 means never).
type ExponentialBackoff struct {
	// Base is the first delay.
	Base time.Duration
	// Max caps every delay, jitter included.
	Max time.Duration
	// Jitter is the fraction of the delay randomized, in [0, 1].
	Jitter float64
	// MaxAttempts is the failure count at which the operation is dead.
	MaxAttempts int64
	// RandFunc returns a float in [0, 1); defaults to math/rand/v2.
	RandFunc func() float64
}

// DefaultBackoff is 1s doubling to 1h with 20% jitter, dead after 10 failures.
func DefaultBackoff() *ExponentialBackoff {
	return &ExponentialBackoff{Base: time.Second, Max: time.Hour, Jitter: 0.2, MaxAttempts: 10}
}

// Validate refuses a policy that cannot be right: a non-positive Base
// (failures would be re-driven at once, a hot loop against the provider), a
// Max below Base, a Jitter outside [0, 1], or a negative MaxAttempts. New
// calls it on any policy that has it.
func (b *ExponentialBackoff) Validate() error {
	switch {
	case b.Base <= 0:
		return invalid("backoff base %v must be positive", b.Base)
	case b.Max < b.Base:
		return invalid("backoff max %v is below its base %v", b.Max, b.Base)
	case b.Jitter < 0 || b.Jitter > 1 || math.IsNaN(b.Jitter):
		return invalid("backoff jitter %v is outside [0, 1]", b.Jitter)
	case b.MaxAttempts < 0:
		return invalid("backoff max attempts %d is negative", b.MaxAttempts)
	}
	return nil
}

// Next implements BackoffPolicy.
func (b *ExponentialBackoff) Next(attempts int64, _ string) (time.Duration, bool) {
	if b.MaxAttempts > 0 && attempts >= b.MaxAttempts {
		return 0, true
	}
	exp := math.Min(float64(max(attempts-1, 0)), 62)
	delay := math.Min(float64(b.Base)*math.Pow(2, exp), float64(b.Max))
	if b.Jitter > 0 {
		r := rand.Float64
		if b.RandFunc != nil {
			r = b.RandFunc
		}
		delay += delay * b.Jitter * (2*r() - 1)
	}
	return time.Duration(math.Max(0, math.Min(delay, float64(b.Max)))), false
}
