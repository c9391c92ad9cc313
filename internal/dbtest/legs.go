package dbtest

import "testing"

// The kinds of database a leg runs on.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Leg is one database configuration a test runs on.
type Leg struct {
	// Name names the leg's subtest.
	Name string
	// Kind is Postgres or SQLite.
	Kind string
	// Partitioned creates the tables hash-partitioned
	// (migrations.PartitionedLayout) before the migrations adopt them.
	Partitioned bool
	// Plain opens SQLite with the plain driver and a DSN (a user's own
	// handle, waiting in SQLite's busy handler), not through sqliteconn.
	Plain bool
}

// The legs.
var (
	PG            = Leg{Name: "postgres", Kind: Postgres}
	PGPartitioned = Leg{Name: "postgres-partitioned", Kind: Postgres, Partitioned: true}
	Lite          = Leg{Name: "sqlite", Kind: SQLite}
	PlainLite     = Leg{Name: "sqlite-plain", Kind: SQLite, Plain: true}
)

// Suite is the integration suite's legs: PostgreSQL, SQLite through
// sqliteconn (as the README tells users to open it), and PostgreSQL
// partitioned.
func Suite() []Leg { return []Leg{PG, Lite, PGPartitioned} }

// All is every leg: the conformance suites run each statement and each
// dialect rendering on all of them.
func All() []Leg { return []Leg{PG, Lite, PlainLite, PGPartitioned} }

// Each runs fn as a parallel subtest per leg, each with a migrated database
// of its own (Setup with opts).
func Each(t *testing.T, legs []Leg, opts Options, fn func(t *testing.T, env *Env)) {
	t.Helper()
	for _, leg := range legs {
		t.Run(leg.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, Setup(t, leg, opts))
		})
	}
}
