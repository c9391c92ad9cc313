package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestDashboardOperationFilters: the operations listing narrows by
// account, caller and document (alone and together, with owner and
// connector), pages a narrowed listing by its cursor through every match
// once, and refuses those filters on the committed journal (400).
func TestDashboardOperationFilters(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		var ins []repository.OperationInput
		for i := range 24 {
			in := input(fmt.Sprintf("op-%02d", i))
			in.AccountKey = fmt.Sprintf("acct-%d", i%3)
			in.CallerDID = fmt.Sprintf("caller-%d", i%2)
			doc := fmt.Sprintf("doc-%d", i%4)
			in.DocumentID = &doc
			in.OwnerDID = fmt.Sprintf("owner-%d", i%5)
			ins = append(ins, in)
		}
		_, err := e.Repo.RecordOperations(context.Background(), ins)
		require.NoError(t, err)
		srv := serve(t, e.Repo, dashboard.Options{})
		list := func(q url.Values) []string {
			t.Helper()
			q.Set("format", "json")
			q.Set("limit", "2")
			var ids []string
			for pages := 0; ; pages++ {
				require.Less(t, pages, 30)
				status, body, _ := get(t, srv, "/ops/operations?"+q.Encode())
				require.Equal(t, http.StatusOK, status, body)
				var page struct {
					Operations []struct {
						OperationID string `json:"operation_id"`
					} `json:"operations"`
					Next map[string]string `json:"next"`
				}
				require.NoError(t, json.Unmarshal([]byte(body), &page))
				for _, op := range page.Operations {
					ids = append(ids, op.OperationID)
				}
				if page.Next == nil {
					return ids
				}
				q = url.Values{"format": {"json"}}
				for k, v := range page.Next {
					q.Set(k, v)
				}
			}
		}
		want := func(match func(i int) bool) []string {
			var ids []string
			for i := range 24 {
				if match(i) {
					ids = append(ids, fmt.Sprintf("op-%02d", i))
				}
			}
			return ids
		}
		for _, tc := range []struct {
			q     url.Values
			match func(i int) bool
		}{
			{url.Values{"account": {"acct-1"}}, func(i int) bool { return i%3 == 1 }},
			{url.Values{"caller": {"caller-0"}}, func(i int) bool { return i%2 == 0 }},
			{url.Values{"document": {"doc-3"}}, func(i int) bool { return i%4 == 3 }},
			{url.Values{"account": {"acct-0"}, "caller": {"caller-1"}}, func(i int) bool { return i%3 == 0 && i%2 == 1 }},
			{url.Values{"document": {"doc-1"}, "owner": {"owner-1"}, "connector": {"crm"}}, func(i int) bool { return i%4 == 1 && i%5 == 1 }},
			{url.Values{"account": {"acct-9"}}, func(int) bool { return false }},
		} {
			tc.q.Set("state", "attempted")
			// Record order is the batch's, not the input's: every match once.
			require.ElementsMatch(t, want(tc.match), list(tc.q), "%v", tc.q)
		}

		_, body, _ := get(t, srv, "/ops/operations?state=attempted&account=acct-1")
		require.Contains(t, body, `name="account" value="acct-1"`, "the filter form keeps what was asked")
		for _, q := range []string{"state=committed&account=a", "state=committed&caller=c", "state=committed&document=d",
			"account=%00", "document=" + url.QueryEscape(string(make([]byte, 2000)))} {
			status, body, _ := get(t, srv, "/ops/operations?"+q)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", q, body)
		}
		status, _, _ := get(t, srv, "/ops/operations?state=committed&owner=owner-1&connector=crm")
		require.Equal(t, http.StatusOK, status)
	})
}
