package main

import (
	"github.com/stretchr/testify/require"
	"testing"
)

// Was: "--" ends flag parsing for the standard flag package, but the
// CLI re-parses every argument after the first positional one, so an
// operation id that starts with '-' cannot be named even after "--"
// (usage error, exit 2).
func TestCLIDoubleDashEndsFlags(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		record(t, d.repo, "-dash")
		r := runCLI(t, nil, "-dsn", d.dsn, "ops", "cancel", "--", "did:key:caller/-dash")
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		require.Contains(t, r.stdout, "cancelled")
	})
}
