package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// hostile is an operation id an application might store: it must show as
// text, and no script of it may run.
const hostile = `<img src=x onerror=alert(1)><script>alert(2)</script>`

// artifacts is where the test saves its screenshots:
// $CONNSTORE_TEST_ARTIFACTS (make test sets it to artifacts/ at the
// repository's root), else a directory under the system's temporary one.
func artifacts(t *testing.T) string {
	dir := os.Getenv("CONNSTORE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "connstore-artifacts")
	}
	dir = filepath.Join(dir, "dashboard")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func record(t *testing.T, repo *repository.Repository, id, op string) {
	t.Helper()
	doc := "doc-" + id
	_, _, err := repo.RecordOperation(context.Background(), repository.OperationInput{CallerDID: "did:key:caller", OperationID: id,
		NodeKey: "n", OwnerDID: "did:key:owner", ConnectorName: "crm", Model: "contact", Op: op, AccountKey: "acct",
		Target: "contacts", DeterministicEventID: "e-" + id, PayloadHash: "h", DocumentID: &doc, ReissueIntent: models.JSON(`{}`)})
	require.NoError(t, err)
}

// TestDashboardRequeueInChromium: an operator opens the overview of a
// seeded database, follows the dead operations to one's detail, presses
// Requeue, and sees the operation attempted and due again; the page of an
// operation whose id is markup shows the id as text and runs no script.
// Screenshots of each step go to the artifacts directory. Under CI the test
// fails, never skips, when chromium is missing.
func TestDashboardRequeueInChromium(t *testing.T) {
	bin := os.Getenv("CONNSTORE_TEST_CHROMIUM")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CONNSTORE_TEST_CHROMIUM is not set: the browser test cannot be skipped under CI")
		}
		t.Skip("CONNSTORE_TEST_CHROMIUM is not set")
	}
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	c := context.Background()
	for _, id := range []string{"sync-contact-1", "sync-contact-2", hostile} {
		record(t, e.Repo, id, "update")
	}
	// One operation the provider refused for good: cancelled to dead.
	_, err := e.Repo.CancelOperation(c, repository.CancelParams{OperationKey: repository.OperationKey{
		CallerDID: "did:key:caller", OperationID: "sync-contact-2"}})
	require.NoError(t, err)

	h, err := dashboard.New(e.Repo, dashboard.Options{BasePath: "/ops", Refresh: -1,
		Authorize: func(*http.Request, dashboard.Action) error { return nil }})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	alloc, cancel := chromedp.NewExecAllocator(c, chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Any dialog (alert) or uncaught script error is a script that ran.
	var dialogs, exceptions atomic.Int32
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		switch ev.(type) {
		case *page.EventJavascriptDialogOpening:
			dialogs.Add(1)
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			exceptions.Add(1)
		}
	}))
	dir := artifacts(t)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err)
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}

	do(chromedp.Navigate(srv.URL+"/ops/"), chromedp.WaitVisible(`h1`))
	overview := text(`main`)
	shot("overview.png")
	require.Contains(t, overview, "dead")
	// The dead queue's link on the overview, then the operation's.
	do(chromedp.Click(`a[href="/ops/operations?connector=crm&state=dead"]`), chromedp.WaitVisible(`a[href*="op=sync-contact-2"]`))
	shot("dead.png")
	do(chromedp.Click(`a[href*="op=sync-contact-2"]`), chromedp.WaitVisible(`form[action="/ops/actions/requeue"] button`))
	detail := text(`main`)
	shot("operation-dead.png")
	require.Contains(t, detail, "sync-contact-2")
	require.Contains(t, detail, models.OperationDead)

	do(chromedp.Click(`form[action="/ops/actions/requeue"] button`), chromedp.WaitVisible(`.notice`))
	after := text(`main`)
	shot("operation-requeued.png")
	require.Contains(t, after, "Done: requeue")
	op, err := e.Repo.GetOperation(c, repository.OperationKey{CallerDID: "did:key:caller", OperationID: "sync-contact-2"})
	require.NoError(t, err)
	require.Equal(t, models.OperationAttempted, op.State, "the press requeued it")
	require.Contains(t, after, models.OperationAttempted)
	require.Contains(t, after, "the next claim takes it", "due again, in words")

	// The hostile id: listed and shown as text, no script run.
	do(chromedp.Navigate(srv.URL+"/ops/operations?state=attempted"), chromedp.WaitVisible(`table`))
	listed := text(`table`)
	do(chromedp.Click(`a[href*="op=%3Cimg"]`), chromedp.WaitVisible(`h1`))
	shown := text(`main`)
	shot("operation-hostile-id.png")
	require.Contains(t, listed, hostile, "the id is text in the listing")
	require.Contains(t, shown, hostile, "and on its page")
	parsed, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script").length`))
	require.NoError(t, err)
	require.Zero(t, parsed, "no element of the id was parsed")
	time.Sleep(200 * time.Millisecond) // an onerror would have fired by now
	require.Zero(t, dialogs.Load(), "no alert ran")
	require.Zero(t, exceptions.Load(), "no script error")
	t.Logf("screenshots in %s", dir)
}
