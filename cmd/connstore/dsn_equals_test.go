package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Was: any DSN containing '=' is taken for a PostgreSQL key=value DSN,
// so a SQLite file in a directory like "shard=2" (a common partition-style
// path) cannot be used at all: "migrate up" tries to reach PostgreSQL.
func TestCLISQLitePathWithEquals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shard=2")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "app.db")
	r := runCLI(t, []string{"PGCONNECT_TIMEOUT=2"}, "-dsn", path, "migrate", "up")
	require.Equal(t, 0, r.code, r.stderr)
	_, err := os.Stat(path)
	require.NoError(t, err)
}
