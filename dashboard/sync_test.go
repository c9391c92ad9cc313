package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// seedTables gives every table the overview summarizes a row or more:
// sync states in each status (one owner's error is markup), a watch due
// and one not, a finished operation for retention to judge, a sweep
// checkpoint.
func seedTables(t *testing.T, repo *repository.Repository, owners ...string) {
	t.Helper()
	c := context.Background()
	for i, owner := range owners {
		status := []string{models.SyncStatusIdle, models.SyncStatusSyncing, models.SyncStatusError}[i%3]
		var msg *string
		if status == models.SyncStatusError {
			m := "provider said " + evil
			msg = &m
		}
		require.NoError(t, repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: owner, ConnectorName: "crm"},
			repository.SyncStateInput{LastSyncedAt: "2026-12-01T00:00:00Z", Status: status, Error: msg}))
		for j, at := range []time.Time{{}, time.Now().Add(time.Hour)} {
			_, err := repo.ArmWatch(c, repository.ArmWatchParams{WatchKey: repository.WatchKey{OwnerDID: owner, ConnectorName: "crm",
				Model: "contact", AccountKey: "acct", SourceID: fmt.Sprintf("src-%d", j)}, DocumentID: "doc", VerifyAt: at})
			require.NoError(t, err)
		}
		in := input("finished-" + owner)
		in.OwnerDID = owner
		_, _, err := repo.RecordOperation(c, in)
		require.NoError(t, err)
		_, err = repo.CancelOperation(c, repository.CancelParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: in.OperationID}})
		require.NoError(t, err)
		key := repository.ReceiptKey{PartitionKey: repository.PartitionKey{OwnerDID: owner, ConnectorName: "crm", Partition: "p"}, Provenance: "prov"}
		_, err = repo.RecordRelistReceipt(c, repository.RelistReceipt{ReceiptKey: key, ModelID: "contact",
			Scope: models.JSON(`{"list":"all"}`), SourceFetchHLC: "hlc-1", Kind: "full", Complete: true},
			nil)
		require.NoError(t, err)
		_, err = repo.CommitSweepCheckpoint(c, key)
		require.NoError(t, err)
	}
}

type tablesJSON struct {
	Tables struct {
		SyncStates []struct {
			ConnectorName string `json:"connector_name"`
			Status        string `json:"status"`
			Count         int64  `json:"count"`
		} `json:"sync_states"`
		WatchesDue struct {
			N       int64 `json:"n"`
			AtLeast bool  `json:"at_least"`
		} `json:"watches_due"`
		ToJudge struct {
			N int64 `json:"n"`
		} `json:"retention_to_judge"`
		Checkpoints []struct {
			ConnectorName string `json:"connector_name"`
			Partitions    int64  `json:"partitions"`
		} `json:"sweep_checkpoints"`
	} `json:"tables"`
}

// TestDashboardOverviewTables: the overview counts sync states by status,
// watches due, retention's rows to judge and sweeps' checkpoints, on both
// databases, escaped, and a scoped repository's dashboard counts only its
// own owners' rows.
func TestDashboardOverviewTables(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		seedTables(t, e.Repo, "owner-a", "owner-b", "owner-c", "owner-d")
		srv := serve(t, e.Repo, dashboard.Options{})
		status, body, _ := get(t, srv, "/ops/")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "Sync states")
		require.Contains(t, body, `href="/ops/sync?connector=crm"`)
		require.Contains(t, body, "Projection watches due for verification</th><td>4</td>")
		require.Contains(t, body, "waiting to be judged</th><td>4</td>")
		require.NotContains(t, body, evil)

		var ov tablesJSON
		_, body, _ = get(t, srv, "/ops/?format=json")
		require.NoError(t, json.Unmarshal([]byte(body), &ov))
		byStatus := map[string]int64{}
		for _, s := range ov.Tables.SyncStates {
			require.Equal(t, "crm", s.ConnectorName)
			byStatus[s.Status] = s.Count
		}
		require.Equal(t, map[string]int64{"idle": 2, "syncing": 1, "error": 1}, byStatus)
		require.Equal(t, int64(4), ov.Tables.WatchesDue.N, "the watches due now, not the ones due in an hour")
		require.False(t, ov.Tables.WatchesDue.AtLeast)
		require.Equal(t, int64(4), ov.Tables.ToJudge.N)
		require.Len(t, ov.Tables.Checkpoints, 1)
		require.Equal(t, int64(4), ov.Tables.Checkpoints[0].Partitions)

		scoped, err := e.Repo.WithScopes(context.Background(), scopes.Owner("owner-a"))
		require.NoError(t, err)
		_, body, _ = get(t, serve(t, scoped, dashboard.Options{}), "/ops/?format=json")
		ov = tablesJSON{}
		require.NoError(t, json.Unmarshal([]byte(body), &ov))
		require.Len(t, ov.Tables.SyncStates, 1)
		require.Equal(t, int64(1), ov.Tables.SyncStates[0].Count)
		require.Equal(t, int64(1), ov.Tables.WatchesDue.N)
		require.Equal(t, int64(1), ov.Tables.ToJudge.N)
		require.Equal(t, int64(1), ov.Tables.Checkpoints[0].Partitions)
	})
}

// TestDashboardSyncStates: the sync-states page lists a connector's rows
// by owner, paged by owner, escaped; its status change goes through the
// admin API's compare-and-swap from the status shown, so a workflow that
// moved the row since is answered 409 and nothing is overwritten; read-only
// and refused dashboards change nothing; bad input is 400.
func TestDashboardSyncStates(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		c := context.Background()
		seedTables(t, e.Repo, "owner-a", "owner-b", "owner-c")
		key := repository.ConnectorKey{OwnerDID: "owner-c", ConnectorName: "crm"}
		statusOf := func() (string, string) {
			s, err := e.Repo.GetSyncState(c, key)
			require.NoError(t, err)
			return s.Status, deref(s.Error)
		}

		open := serve(t, e.Repo, dashboard.Options{Authorize: allow})
		status, body, _ := get(t, open, "/ops/sync")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, `href="/ops/sync?connector=crm"`)
		status, body, _ = get(t, open, "/ops/sync?connector=crm&limit=2")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "owner-a")
		require.NotContains(t, body, "owner-c", "the second page's")
		require.Contains(t, body, `after_owner=owner-b`)
		_, body, _ = get(t, open, "/ops/sync?connector=crm&after_owner=owner-b&limit=2")
		require.Contains(t, body, "owner-c")
		require.Contains(t, body, "provider said &lt;script&gt;")
		require.NotContains(t, body, evil)
		require.Contains(t, body, `name="if_status" value="error"`)

		form := url.Values{"connector": {"crm"}, "owner": {"owner-c"}, "status": {"idle"}, "if_status": {"error"}}
		for _, srv := range []*struct {
			o    dashboard.Options
			want int
		}{
			{dashboard.Options{}, http.StatusForbidden},
			{dashboard.Options{Authorize: func(*http.Request, dashboard.Action) error { return fmt.Errorf("no") }}, http.StatusForbidden},
		} {
			status, _ = post(t, serve(t, e.Repo, srv.o), "/ops/actions/set_sync_status", form, "same-origin")
			require.Equal(t, srv.want, status)
		}
		status, _ = post(t, open, "/ops/actions/set_sync_status", form, "cross-site")
		require.Equal(t, http.StatusForbidden, status)
		for _, bad := range []url.Values{
			{"connector": {"crm"}, "owner": {"owner-c"}, "status": {"bogus"}},
			{"connector": {"crm"}, "owner": {"owner-c"}, "status": {""}},
			{"connector": {""}, "owner": {"owner-c"}, "status": {"idle"}},
		} {
			status, body = post(t, open, "/ops/actions/set_sync_status", bad, "same-origin")
			require.Equal(t, http.StatusBadRequest, status, "%v: %s", bad, body)
		}
		st, msg := statusOf()
		require.Equal(t, models.SyncStatusError, st, "nothing refused changed the row")
		require.Contains(t, msg, "provider said")

		// The workflow moves the row after the page was read: the form's
		// change, from the status it showed, is refused.
		_, err := e.Repo.SetSyncStatus(c, repository.SetSyncStatusParams{Key: key, Status: models.SyncStatusSyncing})
		require.NoError(t, err)
		status, body = post(t, open, "/ops/actions/set_sync_status", form, "same-origin")
		require.Equal(t, http.StatusConflict, status, body)
		st, _ = statusOf()
		require.Equal(t, models.SyncStatusSyncing, st)

		form.Set("if_status", "syncing")
		status, _ = post(t, open, "/ops/actions/set_sync_status", form, "same-origin")
		require.Equal(t, http.StatusSeeOther, status)
		st, msg = statusOf()
		require.Equal(t, models.SyncStatusIdle, st)
		require.Empty(t, msg, "an empty error clears it")

		status, _ = post(t, open, "/ops/actions/set_sync_status",
			url.Values{"connector": {"crm"}, "owner": {"nobody"}, "status": {"idle"}}, "same-origin")
		require.Equal(t, http.StatusNotFound, status)

		status, body, _ = get(t, open, "/ops/sync?connector=crm&limit=0")
		require.Equal(t, http.StatusBadRequest, status, body)
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
