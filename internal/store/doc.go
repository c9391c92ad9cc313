// Package store holds the text of the repository's hand-written SQL: the
// conditions gorm's builder cannot express (row values, expressions written
// so no index serves them, keyset comparisons) and the few statements the
// repository writes out whole, one file per table. The repository composes
// them with gorm; it writes no SQL of its own (make lint checks: no Raw,
// Exec or string Where in repository/). What differs between PostgreSQL and
// SQLite is internal/dialect's, not this package's.
package store
