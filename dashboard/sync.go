package dashboard

import (
	"net/http"
	"time"

	"github.com/connstore/connstore/internal/overview"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// syncData is a page of one connector's sync states, or, with no
// connector asked for, the connectors that have any (from the overview's
// counts).
type syncData struct {
	Now        time.Time            `json:"now"`
	Connector  string               `json:"connector,omitempty"`
	States     []syncView           `json:"sync_states,omitempty"`
	Connectors []string             `json:"connectors,omitempty"`
	Statuses   []string             `json:"statuses"`
	Next       map[string]string    `json:"next,omitempty"`
	Counts     []overview.SyncCount `json:"counts,omitempty"`
}

// syncView is one sync state as the page shows it: its status and error,
// the progress the connector reported, and its compare-and-swap version.
type syncView struct {
	ConnectorName string  `json:"connector_name"`
	OwnerDID      string  `json:"owner_did"`
	Status        string  `json:"status"`
	Error         *string `json:"error,omitempty"`
	LastSyncedAt  string  `json:"last_synced_at"`
	EntityCount   int64   `json:"entity_count"`
	Version       int64   `json:"version"`
}

// syncStates lists a connector's sync states by owner, paged by owner
// (ListSyncStates' own cursor).
func (d *dashboard) syncStates(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(q)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f, err := texts(q, "connector", "after_owner")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := syncData{Now: d.repo.Now(), Connector: f["connector"], Statuses: syncStatuses}
	if f["connector"] == "" {
		o, err := d.repo.ReadOverview(r.Context(), repository.OverviewParams{SyncStatesOnly: true})
		if err != nil {
			d.fail(w, r, err)
			return
		}
		data.Counts = o.SyncStates
		for _, c := range o.SyncStates {
			if len(data.Connectors) == 0 || data.Connectors[len(data.Connectors)-1] != c.ConnectorName {
				data.Connectors = append(data.Connectors, c.ConnectorName)
			}
		}
		d.render(w, r, "sync", "Sync states", data)
		return
	}
	rows, err := d.repo.ListSyncStates(r.Context(), repository.ListSyncStatesParams{ConnectorName: f["connector"],
		AfterOwnerDID: f["after_owner"], Limit: n})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, s := range rows {
		data.States = append(data.States, syncView{ConnectorName: s.ConnectorName, OwnerDID: s.OwnerDID, Status: s.Status,
			Error: s.Error, LastSyncedAt: s.LastSyncedAt, EntityCount: s.EntityCount, Version: s.Version})
	}
	if len(rows) == n {
		data.Next = map[string]string{"connector": f["connector"], "after_owner": rows[len(rows)-1].OwnerDID, "limit": itoa(int64(n))}
	}
	d.render(w, r, "sync", "Sync states", data)
}

// syncStatuses are the statuses an operator may set.
var syncStatuses = []string{models.SyncStatusIdle, models.SyncStatusSyncing, models.SyncStatusError}
