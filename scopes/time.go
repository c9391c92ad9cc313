package scopes

import (
	"time"

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
func LeaseFree(now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Or(
			clause.Eq{Column: col("lease_token"), Value: nil},
			clause.Lt{Column: col("lease_expires_at"), Value: now.UnixMilli()},
		))
	}
}

// LeaseHeld filters rows still leased under token at now; it is the fence
// on every lease holder's write.
func LeaseHeld(token string, now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.And(
			clause.Eq{Column: col("lease_token"), Value: token},
			clause.Gte{Column: col("lease_expires_at"), Value: now.UnixMilli()},
		))
	}
}

// WatchScheduled is the SCHEDULE branch of the due sweep: watches not yet
// verified whose own schedule is due. An exhausted repair_failed watch has
// its schedule cleared to NULL, so it is excluded without naming it.
func WatchScheduled(now time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.And(
			clause.Neq{Column: col("verification_status"), Value: "verified"},
			clause.Neq{Column: col("next_attempt_at"), Value: nil},
			clause.Lte{Column: col("next_attempt_at"), Value: now.UnixMilli()},
		))
	}
}

// UpdatedBefore filters rows last written before t.
func UpdatedBefore(t time.Time) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Lt{Column: col("updated_at"), Value: t.UnixMilli()})
	}
}
