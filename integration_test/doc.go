// Package integrationtest runs connstore against real PostgreSQL and SQLite
// databases. Every test runs once per database through forEachDB, each in
// its own Postgres schema or SQLite file, so tests run in parallel.
//
// PostgreSQL comes from CONNSTORE_TEST_PG_DSN (scripts/test.sh starts a
// throwaway server and sets it). Without it the Postgres half skips, except
// under CI=true, where it fails.
package integrationtest
