package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunSQLite(t *testing.T) {
	var out bytes.Buffer
	file := filepath.Join(t.TempDir(), "example.db")
	require.NoError(t, run(context.Background(), &out, "", file))
	require.Contains(t, out.String(), `checkpoint {"page":20,"pages":20}, entities 200, version 19, status idle`)
	require.Regexp(t, `attempt 1 failed \(HTTP 503\)`, out.String())
	require.Regexp(t, `committed as document doc-op-\d+ after 1 failed attempt`, out.String())
	require.Contains(t, out.String(), "due sweep: 0 operation(s), 1 watch(es) to verify")
	require.Contains(t, out.String(), "sweep: receipt 1 of partition contacts committed (advanced true); checkpoint at receipt 1")
	require.Contains(t, out.String(), "retention: collected 0 superseded operation(s)")
	// A second run on the same file starts over cleanly.
	out.Reset()
	require.NoError(t, run(context.Background(), &out, "", file))
	require.Contains(t, out.String(), "version 19")
	require.Regexp(t, `sweep: receipt \d+ of partition contacts committed \(advanced true\)`, out.String())
}

func TestRunPostgres(t *testing.T) {
	dsn := os.Getenv("CONNSTORE_TEST_PG_DSN")
	if dsn == "" {
		t.Skip("CONNSTORE_TEST_PG_DSN is not set")
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, dsn, ""))
	require.Contains(t, out.String(), "connstore example on PostgreSQL")
	require.Contains(t, out.String(), "version 19")
	require.Regexp(t, `sweep: receipt \d+ of partition contacts committed \(advanced true\)`, out.String())
}
