package connstoretest

import (
	"sync/atomic"
	"time"
)

// Clock is a manual clock in whole milliseconds (the store's resolution):
// time moves only when a test moves it. Pass Clock.Now as
// repository.Options.NowFunc. It is safe for concurrent use.
type Clock struct{ ms atomic.Int64 }

// NewClock returns a clock reading start (truncated to the millisecond).
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	c.ms.Store(start.UnixMilli())
	return c
}

// Now reads the clock, in UTC.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()).UTC() }

// Advance moves the clock by d (which may be negative, to test skew).
func (c *Clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// Millis reads the clock in epoch milliseconds, the unit the store's
// time columns hold.
func (c *Clock) Millis() int64 { return c.ms.Load() }

// At is the clock's time plus offset: a cutoff or deadline relative to
// now.
func (c *Clock) At(offset time.Duration) time.Time { return c.Now().Add(offset) }
