// Package dbtest is the test databases of the whole module: the legs a
// test runs on (PostgreSQL in a fresh schema, PostgreSQL with every table
// hash-partitioned, SQLite through sqliteconn, SQLite through a plain DSN
// waiting in the driver's busy handler), how each is created, opened and
// migrated, and the rule that a PostgreSQL test skips without a server but
// fails under CI=true. The integration suite, the store's and the
// dialect's conformance suites, and connstoretest (the users' helpers, and
// through it otelconnstore's tests and the bench) are built on it, so the
// suite opens its databases the way users are told to.
package dbtest
