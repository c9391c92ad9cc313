package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// evil is a value an application might store that must render as text.
const evil = `<script>alert(1)</script>`

func input(id string) repository.OperationInput {
	doc := "doc-" + evil
	return repository.OperationInput{CallerDID: "caller", OperationID: id, NodeKey: "n", OwnerDID: "owner", ConnectorName: "crm",
		Model: "contact", Op: evil, AccountKey: "acct", Target: "t", DeterministicEventID: "e" + id, PayloadHash: "h",
		DocumentID: &doc, ReissueIntent: models.JSON(`{"x":1}`)}
}

// serve mounts the dashboard under /ops as a host would.
func serve(t *testing.T, repo *repository.Repository, o dashboard.Options) *httptest.Server {
	t.Helper()
	o.BasePath = "/ops"
	h, err := dashboard.New(repo, o)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string, http.Header) {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + path)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body), res.Header
}

// post sends a same-origin form POST (as a browser would: Sec-Fetch-Site
// same-origin), or a cross-site one.
func post(t *testing.T, srv *httptest.Server, path string, form url.Values, site string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", site)
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}

func allow(*http.Request, dashboard.Action) error { return nil }

// TestDashboardPages: every page and its JSON twin, on both databases:
// content, escaping of stored values, the security headers, paging by
// the repository's cursor.
func TestDashboardPages(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		c := context.Background()
		for i := range 7 {
			_, _, err := e.Repo.RecordOperation(c, input(fmt.Sprintf("op-%d", i)))
			require.NoError(t, err)
		}
		require.NoError(t, e.Repo.SetAccountLimits(c, repository.AccountKey{ConnectorName: "crm", AccountKey: evil},
			repository.AccountLimits{MaxInFlight: 3}))
		require.NoError(t, e.Repo.PauseAccount(c, repository.AccountKey{ConnectorName: "crm", AccountKey: evil}, time.Now().Add(time.Hour)))
		srv := serve(t, e.Repo, dashboard.Options{})

		status, body, h := get(t, srv, "/ops/")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'")
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		require.Contains(t, body, `<meta http-equiv="refresh" content="5; url=/ops/">`)
		require.Contains(t, body, `href="/ops/operations?connector=crm&amp;state=attempted"`)
		require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;", "the paused account's key, escaped")
		require.NotContains(t, body, evil)
		_, body, _ = get(t, srv, "/ops/?refresh=off")
		require.NotContains(t, body, "http-equiv", "the operator turned refreshing off")

		var ov struct {
			Queues []struct {
				ConnectorName, State string
				Owners               int
				Count                int64
			} `json:"queues"`
			Paused []repository.AccountStatus `json:"paused_accounts"`
		}
		status, body, h = get(t, srv, "/ops/?format=json")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "application/json", h.Get("Content-Type"))
		require.NoError(t, json.Unmarshal([]byte(body), &ov))
		require.Len(t, ov.Queues, 1)
		require.Equal(t, int64(7), ov.Queues[0].Count)
		require.Len(t, ov.Paused, 1)

		// A page of 3, then the next by the page's own link.
		status, body, _ = get(t, srv, "/ops/operations?state=attempted&limit=3")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "caller/op-0")
		require.NotContains(t, body, evil)
		require.Contains(t, body, "doc-&lt;script&gt;")
		var page struct {
			Operations []struct {
				OperationID string `json:"operation_id"`
			} `json:"operations"`
			Next map[string]string `json:"next"`
		}
		seen := map[string]bool{}
		next := "/ops/operations?state=attempted&limit=3&format=json"
		for pages := 0; next != ""; pages++ {
			require.Less(t, pages, 5)
			_, body, _ = get(t, srv, next)
			page.Next = nil
			require.NoError(t, json.Unmarshal([]byte(body), &page))
			for _, op := range page.Operations {
				require.False(t, seen[op.OperationID], "no row twice")
				seen[op.OperationID] = true
			}
			next = ""
			if page.Next != nil {
				q := url.Values{}
				for k, v := range page.Next {
					q.Set(k, v)
				}
				q.Set("format", "json")
				next = "/ops/operations?" + q.Encode()
			}
		}
		require.Len(t, seen, 7, "the cursor pages through every row once")

		status, body, _ = get(t, srv, "/ops/operation?caller=caller&op=op-2")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "Due ")
		require.Contains(t, body, "the next claim takes it")
		require.Contains(t, body, "Cancel")
		require.NotContains(t, body, "Requeue: ", "an attempted operation cannot be requeued")
		require.NotContains(t, body, evil)

		status, body, _ = get(t, srv, "/ops/accounts")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
		require.NotContains(t, body, evil)
		require.Contains(t, body, "Resume")

		status, _, h = get(t, srv, "/ops/assets/style.css")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, h.Get("Content-Type"), "text/css")
	})
}

// TestDashboardBadRequests: bad parameters answer 400 with a message (or
// 404 for a missing row), never 500; listings are bounded.
func TestDashboardBadRequests(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		srv := serve(t, e.Repo, dashboard.Options{})
		for _, tc := range []struct {
			path   string
			status int
			text   string
		}{
			{"/ops/operations?limit=0", 400, "limit"},
			{"/ops/operations?limit=201", 400, "limit"},
			{"/ops/operations?limit=abc", 400, "limit"},
			{"/ops/operations?state=bogus", 400, "state"},
			{"/ops/operations?after_seq=x&after_caller=c&after_op=o", 400, "after_seq"},
			{"/ops/operations?connector=" + strings.Repeat("x", 2000), 400, "connector"},
			{"/ops/operations?owner=%ff", 400, "owner"},
			{"/ops/accounts?connector=%00", 400, "connector"},
			{"/ops/accounts?after_connector=%00", 400, "after_connector"},
			{"/ops/operation", 400, "caller and op"},
			{"/ops/operation?caller=c&op=missing", 404, "not found"},
			{"/ops/accounts?limit=1001", 400, "limit"},
			{"/ops/operations?limit=0&format=json", 400, `"error"`},
		} {
			status, body, _ := get(t, srv, tc.path)
			require.Equal(t, tc.status, status, "%s: %s", tc.path, body)
			require.Contains(t, body, tc.text, tc.path)
		}
	})
}

// TestDashboardActions: an action goes through the admin API when
// Authorize allows it, and changes nothing when the dashboard is
// read-only, when Authorize refuses, when the POST is cross-origin, or
// when its input is bad.
func TestDashboardActions(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		c := context.Background()
		_, _, err := e.Repo.RecordOperation(c, input("op"))
		require.NoError(t, err)
		key := repository.OperationKey{CallerDID: "caller", OperationID: "op"}
		form := url.Values{"caller": {"caller"}, "op": {"op"}}
		stateOf := func() string {
			op, err := e.Repo.GetOperation(c, key)
			require.NoError(t, err)
			return op.State
		}

		readOnly := serve(t, e.Repo, dashboard.Options{})
		status, body := post(t, readOnly, "/ops/actions/cancel", form, "same-origin")
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "read-only")
		_, page, _ := get(t, readOnly, "/ops/operation?caller=caller&op=op")
		require.Contains(t, page, "Cancel", "the form shows; the POST is refused")

		refusing := serve(t, e.Repo, dashboard.Options{Authorize: func(_ *http.Request, a dashboard.Action) error {
			return errors.New("operators only")
		}})
		status, body = post(t, refusing, "/ops/actions/cancel", form, "same-origin")
		require.Equal(t, http.StatusForbidden, status)
		require.Contains(t, body, "operators only")

		open := serve(t, e.Repo, dashboard.Options{Authorize: allow})
		status, body = post(t, open, "/ops/actions/cancel", form, "cross-site")
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "cross-origin")
		require.Equal(t, models.OperationAttempted, stateOf(), "refused actions changed nothing")

		status, body = post(t, open, "/ops/actions/requeue", form, "same-origin")
		require.Equal(t, http.StatusConflict, status, "an attempted operation cannot be requeued: %s", body)
		status, _ = post(t, open, "/ops/actions/bogus", form, "same-origin")
		require.Equal(t, http.StatusBadRequest, status)

		status, _ = post(t, open, "/ops/actions/cancel", form, "same-origin")
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, models.OperationDead, stateOf())
		status, _ = post(t, open, "/ops/actions/requeue", form, "same-origin")
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, models.OperationAttempted, stateOf())

		acct := url.Values{"connector": {"crm"}, "account": {"acct"}, "for": {"10m"}}
		require.NoError(t, e.Repo.SetAccountLimits(c, repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"},
			repository.AccountLimits{MaxInFlight: 2}))
		for _, bad := range []string{"", "-1m", "x", "9000h", "999ms", "1ns"} {
			f := url.Values{"connector": {"crm"}, "account": {"acct"}, "for": {bad}}
			status, _ = post(t, open, "/ops/actions/pause_account", f, "same-origin")
			require.Equal(t, http.StatusBadRequest, status, "pause for %q", bad)
		}
		status, _ = post(t, open, "/ops/actions/pause_account", acct, "same-origin")
		require.Equal(t, http.StatusSeeOther, status)
		paused, err := e.Repo.ListAccounts(c, repository.ListAccountsParams{PausedOnly: true, Limit: 10})
		require.NoError(t, err)
		require.Len(t, paused, 1)
		status, _ = post(t, open, "/ops/actions/resume_account", acct, "same-origin")
		require.Equal(t, http.StatusSeeOther, status)
		paused, err = e.Repo.ListAccounts(c, repository.ListAccountsParams{PausedOnly: true, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, paused)
	})
}

// TestDashboardOptions: a bad BasePath is refused; a nil repository too.
func TestDashboardOptions(t *testing.T) {
	_, err := dashboard.New(nil, dashboard.Options{})
	require.Error(t, err)
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	for _, p := range []string{"ops", "/ops/", "//evil.example", `/\evil.example`, "/ops?x", "/a b"} {
		_, err := dashboard.New(e.Repo, dashboard.Options{BasePath: p})
		require.Error(t, err, p)
	}
}

// TestDashboardShowsNoSecrets: a live lease's token (the holder's
// credential to finish the operation) and the lock's incarnation appear
// in no page and no JSON twin.
func TestDashboardShowsNoSecrets(t *testing.T) {
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	c := context.Background()
	_, _, err := e.Repo.RecordOperation(c, input("op"))
	require.NoError(t, err)
	got, err := e.Repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 1)
	token, incarnation := *got[0].LeaseToken, *got[0].Incarnation
	srv := serve(t, e.Repo, dashboard.Options{})
	for _, path := range []string{"/ops/operation?caller=caller&op=op", "/ops/operation?caller=caller&op=op&format=json",
		"/ops/operations", "/ops/operations?format=json", "/ops/", "/ops/?format=json"} {
		status, body, _ := get(t, srv, path)
		require.Equal(t, http.StatusOK, status, path)
		require.NotContains(t, body, token, path)
		require.NotContains(t, body, incarnation, path)
	}
	_, body, _ := get(t, srv, "/ops/operation?caller=caller&op=op&format=json")
	require.Contains(t, body, `"leased": true`)
}

// TestDashboardOverviewIsBounded: 250 owners of one connector are one row
// of the overview (their sum), not 250.
func TestDashboardOverviewIsBounded(t *testing.T) {
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	ins := make([]repository.OperationInput, 250)
	for i := range ins {
		ins[i] = input(fmt.Sprintf("op-%d", i))
		ins[i].OwnerDID = fmt.Sprintf("owner-%03d", i)
	}
	_, err := e.Repo.RecordOperations(context.Background(), ins)
	require.NoError(t, err)
	srv := serve(t, e.Repo, dashboard.Options{})
	_, body, _ := get(t, srv, "/ops/?format=json")
	var ov struct {
		Queues []struct {
			Owners int
			Count  int64
		} `json:"queues"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ov))
	require.Len(t, ov.Queues, 1)
	require.Equal(t, 250, ov.Queues[0].Owners)
	require.Equal(t, int64(250), ov.Queues[0].Count)
}

// TestDashboardNoticeDoesNotStick: the page an action redirects to shows
// its notice once; its refresh and its stop-refreshing link drop it.
func TestDashboardNoticeDoesNotStick(t *testing.T) {
	e := dbtest.Setup(t, dbtest.Lite, dbtest.Options{})
	srv := serve(t, e.Repo, dashboard.Options{})
	_, body, _ := get(t, srv, "/ops/accounts?connector=crm&done=pause_account")
	require.Contains(t, body, "Done: pause_account")
	require.Contains(t, body, `content="5; url=/ops/accounts?connector=crm"`)
	require.Contains(t, body, `href="?connector=crm&amp;refresh=off"`)
	_, body, _ = get(t, srv, "/ops/accounts?done=bogus")
	require.NotContains(t, body, "Done:")
}
