// Package models holds one GORM model per connstore table and the field
// types those models embed (JSON columns and the optimistic-lock fields).
//
// Table and column names mirror the kubun_connector_* schema so that a
// database written by either implementation reads the same. Times on the
// operation, watch, sweep and pending-auth tables are epoch milliseconds in
// 64-bit columns: millisecond timestamps overflow a 32-bit integer.
//
// The tags declare exactly the schema package migrations creates (column
// types, defaults, NOT NULL and every index by name and column order), so
// gorm's AutoMigrate on a migrated database has nothing to change.
package models
