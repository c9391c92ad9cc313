package scopes

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Scope is a composable query filter.
type Scope = func(*gorm.DB) *gorm.DB

// Eq filters column = value.
func Eq(column string, value any) Scope {
	return func(db *gorm.DB) *gorm.DB {
		return db.Where(clause.Eq{Column: clause.Column{Name: column}, Value: value})
	}
}

// Connector filters rows of one connector.
func Connector(name string) Scope { return Eq("connector_name", name) }

// Owner filters rows of one owner DID.
func Owner(did string) Scope { return Eq("owner_did", did) }

// Caller filters operations recorded by one caller DID.
func Caller(did string) Scope { return Eq("caller_did", did) }

// State filters rows whose state is one of states.
func State(states ...string) Scope { return In("state", states...) }

// In filters column IN (values); an empty list matches nothing.
func In(column string, values ...string) Scope {
	return func(db *gorm.DB) *gorm.DB { return db.Where(in(column, values)) }
}

// NotIn filters column NOT IN (values); an empty list matches everything.
func NotIn(column string, values ...string) Scope {
	return func(db *gorm.DB) *gorm.DB {
		if len(values) == 0 {
			return db
		}
		return db.Where(clause.Not(in(column, values)))
	}
}

func in(column string, values []string) clause.Expression {
	vals := make([]any, len(values))
	for i, v := range values {
		vals[i] = v
	}
	return clause.IN{Column: clause.Column{Name: column}, Values: vals}
}
