package dashboard_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// chromiumEnv names the browser binary the browser test runs (make test
// sets it to Debian's chromium, installing it when missing).
const chromiumEnv = "CONNSTORE_TEST_CHROMIUM"

// TestDashboardInABrowser renders every page in headless Chromium: the
// pages load under their own Content-Security-Policy with no violation
// (the stylesheet is the dashboard's own, there is no inline script or
// style), values stored as markup stay text in the browser's DOM, and the
// DOM holds what the page is for.
func TestDashboardInABrowser(t *testing.T) {
	bin := os.Getenv(chromiumEnv)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: the browser test cannot be skipped under CI", chromiumEnv)
		}
		t.Skipf("%s is not set; skipping the browser test", chromiumEnv)
	}
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	c := context.Background()
	_, _, err := e.Repo.RecordOperation(c, input("op-1"))
	require.NoError(t, err)
	require.NoError(t, e.Repo.SetAccountLimits(c, repository.AccountKey{ConnectorName: "crm", AccountKey: evil},
		repository.AccountLimits{MaxInFlight: 3}))
	// A sync state in error whose message is markup: the sync page has a
	// row to render, and the message must stay text.
	msg := "provider said " + evil
	require.NoError(t, e.Repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
		repository.SyncStateInput{LastSyncedAt: "2026-12-01T00:00:00Z", Status: models.SyncStatusError, Error: &msg}))
	srv := serve(t, e.Repo, dashboard.Options{Authorize: allow})
	for _, tc := range []struct{ path, want string }{
		{"/ops/", "Queues"},
		{"/ops/operations?state=attempted", "caller/op-1"},
		{"/ops/operation?caller=caller&op=op-1", "the next claim takes it"},
		{"/ops/accounts", "Pause"},
		{"/ops/sync?connector=crm", "provider said"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
				"--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", "--dump-dom", srv.URL+tc.path)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "chromium: %s", stderr.String())
			dom := string(out)
			require.Contains(t, dom, tc.want)
			require.Contains(t, dom, "<table", "the page rendered its table")
			require.NotContains(t, dom, evil, "stored markup stays text")
			require.NotContains(t, stderr.String(), "Content Security Policy", "no CSP violation")
		})
	}
}
