#!/usr/bin/env bash
# Fails when a state or status is written as a literal in the statements of
# the store's packages: they must come from the models constants, so that a
# predicate shared by two paths cannot drift between them.
set -euo pipefail
cd "$(dirname "$0")/.."
states="attempted|committed|dead|reconcile_only|pending_verification|verified|repair_failed|pending|present|absent|cancelled|applied|refused|idle|syncing"
hits=$(grep -nE "'($states)'" repository/*.go scopes/*.go worker/*.go internal/*/*.go 2>/dev/null |
	grep -v '_test.go:' || true)
if [ -n "$hits" ]; then
	echo "state literals outside models (use the models constants):" >&2
	echo "$hits" >&2
	exit 1
fi
