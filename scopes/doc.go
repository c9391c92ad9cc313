// Package scopes holds the reusable WHERE fragments every connstore query is
// built from, as func(*gorm.DB) *gorm.DB values for db.Scopes. They name
// columns without a table qualifier, so they compose on any connstore model
// that has the column.
package scopes
