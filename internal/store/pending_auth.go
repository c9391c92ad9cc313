package store

import "gorm.io/gorm/clause"

// StateIn is a pending authorization whose key (its state) is among the
// rows sub selects.
func StateIn(sub any) clause.Expr {
	return clause.Expr{SQL: "state IN (?)", Vars: []any{sub}}
}
