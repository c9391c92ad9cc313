package scopes

import (
	"time"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func col(name string) clause.Column { return clause.Column{Name: name} }

// Due filters rows whose next_attempt_at is NULL or at or before now: a
// re-drive backed off into the future is not due yet.
func Due(now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Or(
			clause.Eq{Column: col("next_attempt_at"), Value: nil},
			clause.Lte{Column: col("next_attempt_at"), Value: now.UnixMilli()},
		))
	}
}

// LeaseFree filters rows with no lease or a lease that expired before now.
func LeaseFree(now time.Time) Scope { return LeaseFreeAt(now.UnixMilli()) }

// LeaseFreeAt is LeaseFree at nowMillis: an epoch-millisecond value, or a
// SQL expression (the database's clock).
func LeaseFreeAt(nowMillis any) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Or(
			clause.Eq{Column: col("lease_token"), Value: nil},
			clause.Lt{Column: col("lease_expires_at"), Value: nowMillis},
		))
	}
}

// LeaseHeld filters rows still leased under token at now; it is the fence
// on every lease holder's write.
func LeaseHeld(token string, now time.Time) Scope { return LeaseHeldAt(token, now.UnixMilli()) }

// LeaseHeldAt is LeaseHeld at nowMillis, a value or a SQL expression.
func LeaseHeldAt(token string, nowMillis any) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.And(
			clause.Eq{Column: col("lease_token"), Value: token},
			clause.Gte{Column: col("lease_expires_at"), Value: nowMillis},
		))
	}
}

// WatchScheduled is the SCHEDULE branch of the due sweep: watches not yet
// verified whose own schedule is due. An exhausted repair_failed watch has
// its schedule cleared to NULL, so it is excluded without naming it.
func WatchScheduled(now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB { return db.Where(watchScheduled(now)) }
}

// WatchSweep is every watch the due sweep must look at: the SCHEDULE branch
// or an AUDIT candidate (verified or repair_failed, whatever its schedule).
// Reading both in one keyset pass visits each watch once, at one moment.
func WatchSweep(now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Or(watchScheduled(now), clause.IN{Column: col("verification_status"),
			Values: []any{models.WatchVerified, models.WatchRepairFailed}}))
	}
}

func watchScheduled(now time.Time) clause.Expression {
	return clause.And(
		clause.Neq{Column: col("verification_status"), Value: models.WatchVerified},
		clause.Neq{Column: col("next_attempt_at"), Value: nil},
		clause.Lte{Column: col("next_attempt_at"), Value: now.UnixMilli()},
	)
}

// UpdatedBefore filters rows last written before t.
func UpdatedBefore(t time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Lt{Column: col("updated_at"), Value: t.UnixMilli()})
	}
}
