#!/usr/bin/env bash
# Project rules beyond gofmt, vet and staticcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

# 1. States are never written as SQL literals in the store's packages: they
#    come from the models constants, so that a predicate shared by two paths
#    cannot drift between them.
states="attempted|committed|dead|reconcile_only|pending_verification|verified|repair_failed|pending|present|absent|cancelled|applied|refused|idle|syncing"
hits=$(grep -nE "'($states)'" repository/*.go scopes/*.go worker/*.go internal/*/*.go 2>/dev/null | grep -v '_test.go:' || true)
if [ -n "$hits" ]; then
	echo "state literals outside models (use the models constants):" >&2
	echo "$hits" >&2
	fail=1
fi

# 2. No library package branches on the database: what differs between
#    PostgreSQL and SQLite is internal/dialect's. (migrations keeps its
#    frozen DDL per database; internal/dbtest names the test legs; the CLI
#    picks a driver for the DSN it is given.)
libs="repository scopes worker hooks sqliteconn connstoretest models internal/fence internal/jsonrows internal/progress internal/retention internal/due internal/store"
hits=$(for d in $libs; do grep -nE 'Dialector\.Name\(\)|isPostgres|"postgres"|"sqlite"' "$d"/*.go 2>/dev/null; done | grep -v '_test.go:' || true)
if [ -n "$hits" ]; then
	echo "dialect branches outside internal/dialect (ask internal/dialect):" >&2
	echo "$hits" >&2
	fail=1
fi
# 3. The repository writes no SQL of its own: hand-written statement text
#    and conditions are internal/store's (one file per table), what differs
#    between the databases internal/dialect's. No Raw, Exec or query call,
#    no Where on a string literal and no SQL expression written out, in
#    repository/, worker/ or the internal rooms that compose statements.
hits=$(for d in repository worker internal/fence internal/retention internal/due internal/progress; do
	grep -nE '\.(Raw|Exec|QueryContext|QueryRowContext|ExecContext)\(|\.Where\("|\.Where\(`|gorm\.Expr\("|clause\.Expr\{SQL: "' "$d"/*.go 2>/dev/null
done | grep -v '_test.go:' || true)
if [ -n "$hits" ]; then
	echo "statement text outside internal/store (put it there):" >&2
	echo "$hits" >&2
	fail=1
fi
exit "$fail"
