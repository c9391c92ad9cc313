package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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
	require.NoError(t, run(context.Background(), &out, config{file: file}))
	require.Contains(t, out.String(), "connstore example on SQLite file "+file)
	requireStory(t, out.String())
	// A second run on the same file tells the same story.
	out.Reset()
	require.NoError(t, run(context.Background(), &out, config{file: file}))
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
		require.NoError(t, run(context.Background(), &out, config{dsn: d}), d)
		require.Contains(t, out.String(), "connstore example on PostgreSQL at ")
		requireStory(t, out.String())
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), &out, config{dsn: "port=notanumber"}), "not a PostgreSQL DSN")
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

// syncWriter is an io.Writer the example's goroutine writes to while the
// test reads.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRunServesDashboard: the example prints its dashboard's URL, and with
// serve keeps it open after the story, showing the story's rows, until
// its context ends.
func TestRunServesDashboard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncWriter{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, out, config{file: filepath.Join(t.TempDir(), "example.db"), dashboard: "127.0.0.1:0", serve: true})
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "keeps serving until interrupted") },
		60*time.Second, 20*time.Millisecond, out.String())
	url := regexp.MustCompile(`Dashboard: (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(out.String())
	require.Len(t, url, 2, out.String())
	res, err := http.Get(url[1] + "operations?state=committed")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), connector, "the story's committed operations are listed")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the example did not stop with its context")
	}
	var none bytes.Buffer
	require.ErrorContains(t, run(context.Background(), &none, config{file: filepath.Join(t.TempDir(), "x.db"), dashboard: "0.0.0.0:0"}),
		"loopback only")
}
