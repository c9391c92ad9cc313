package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// requireStory checks the steps a run reports.
func requireStory(t *testing.T, out string) {
	t.Helper()
	require.Contains(t, out, `checkpoint {"page":20,"pages":20}, entities 200, version 19`)
	require.Contains(t, out, "status idle (the progress path never writes the workflow's status)")
	require.Regexp(t, `attempt 1 failed with HTTP 503`, out)
	require.Regexp(t, `committed it, linked to doc-\w+`, out)
	require.Contains(t, out, "flagged replay=true")
	require.Contains(t, out, "(due by its schedule: 1)")
	require.Regexp(t, `recorded receipt \d+ with 3 candidates`, out)
	require.Contains(t, out, "(advanced: true)")
	require.Contains(t, out, "One pass deleted 1 finished operation(s)")
}

func TestRunSQLite(t *testing.T) {
	var out bytes.Buffer
	file := filepath.Join(t.TempDir(), "example.db")
	require.NoError(t, run(context.Background(), &out, "", file))
	require.Contains(t, out.String(), "connstore example on SQLite file "+file)
	requireStory(t, out.String())
	// A second run on the same file tells the same story.
	out.Reset()
	require.NoError(t, run(context.Background(), &out, "", file))
	requireStory(t, out.String())
}

func TestRunPostgres(t *testing.T) {
	dsn := os.Getenv("CONNSTORE_TEST_PG_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CONNSTORE_TEST_PG_DSN is not set: PostgreSQL tests cannot be skipped under CI")
		}
		t.Skip("CONNSTORE_TEST_PG_DSN is not set")
	}
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	// A key=value DSN without host= is PostgreSQL too, never a silent SQLite
	// run; the host comes from PGHOST, as libpq's would.
	t.Setenv("PGHOST", pc.Host)
	kv := fmt.Sprintf("port=%d user=%s dbname=%s sslmode=disable", pc.Port, pc.User, pc.Database)
	for _, d := range []string{dsn, kv} {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), &out, d, ""), d)
		require.Contains(t, out.String(), "connstore example on PostgreSQL at ")
		requireStory(t, out.String())
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), &out, "port=notanumber", ""), "not a PostgreSQL DSN")
}

// The example's default database lives in the user's cache (or temporary)
// directory, never in the directory it runs from.
func TestDefaultFileOutsideWorkingDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	file := defaultFile()
	require.True(t, filepath.IsAbs(file), file)
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, file)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rel, ".."), "%s is under the working directory", file)
	require.Equal(t, "example.db", filepath.Base(file))
}
