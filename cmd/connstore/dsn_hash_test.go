package main

import (
	"github.com/stretchr/testify/require"
	"os"
	"path/filepath"
	"testing"
)

// Was: a SQLite path is pasted into a "file:" URI unescaped, so a real
// file name holding '#' (or '?', '%') opens a DIFFERENT database: "migrate
// up" migrates (and creates) "app" instead of "app#2.db", and the other
// commands, whose os.Stat check passes on the real file, create an empty
// stray file and run against it.
func TestCLISQLitePathWithHash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app#2.db")
	r := runCLI(t, nil, "-dsn", path, "migrate", "up")
	require.Equal(t, 0, r.code, r.stderr)
	_, err := os.Stat(filepath.Join(dir, "app"))
	require.ErrorIs(t, err, os.ErrNotExist, "a file other than the one named was created")
	_, err = os.Stat(path)
	require.NoError(t, err, "the named database was never created")
}
