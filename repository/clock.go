package repository

import (
	"time"

	"github.com/connstore/connstore/internal/store"
	"gorm.io/gorm"
)

// LeaseClock chooses the clock that takes and checks operation leases.
type LeaseClock int

const (
	// AppLeaseClock takes leases by NowFunc. Every instance's clock must
	// agree with the others' to well within the shortest lease: an instance
	// whose clock runs ahead by more than a lease sees live leases as expired
	// and re-claims them, so the work runs twice.
	AppLeaseClock LeaseClock = iota
	// DatabaseLeaseClock takes and checks leases by the database server's
	// clock (the statement's start time), so application clock skew cannot
	// break a lease. Other times (created_at, updated_at, next_attempt_at,
	// retention cutoffs) still come from NowFunc.
	DatabaseLeaseClock
)

// leaseNow is "now" for lease comparisons: the injected clock's epoch
// milliseconds, or the database clock's SQL expression.
func (r *Repository) leaseNow() any {
	if r.leaseClock == DatabaseLeaseClock {
		return gorm.Expr(r.dialect.NowMillis())
	}
	return r.nowMillis()
}

// leaseUntil is leaseNow + d, the expiry of a lease taken or extended now.
func (r *Repository) leaseUntil(d time.Duration) any {
	if r.leaseClock == DatabaseLeaseClock {
		return store.Plus(r.leaseNow(), d.Milliseconds())
	}
	return r.now().Add(d).UnixMilli()
}
