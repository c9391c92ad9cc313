package main

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

func syncListFlags(c *cli) {
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "the connector whose sync states are listed (required)")
	c.fs.Var((*partFlag)(&c.f.after), "after", "resume after this owner DID, as the last line of the previous page printed it")
	c.fs.IntVar(&c.f.limit, "limit", 50, "page size")
}

// syncView is one sync state as JSON; the recovery buffer is left out (it
// may be large and is the connector's own).
type syncView struct {
	Connector    string      `json:"connector"`
	Owner        string      `json:"owner"`
	Status       string      `json:"status"`
	Error        *string     `json:"error"`
	EntityCount  int64       `json:"entity_count"`
	LastSyncedAt string      `json:"last_synced_at"`
	Checkpoint   models.JSON `json:"checkpoint,omitempty"`
	Version      int64       `json:"version"`
}

func syncViewOf(s *models.SyncState) syncView {
	return syncView{s.ConnectorName, s.OwnerDID, s.Status, s.Error, s.EntityCount, s.LastSyncedAt, s.Checkpoint, s.Version}
}

func syncList(ctx context.Context, c *cli) error {
	if c.f.connector == "" {
		return fmt.Errorf("%w: sync list needs -connector", errUsage)
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	rows, err := repo.ListSyncStates(ctx, repository.ListSyncStatesParams{ConnectorName: c.f.connector,
		AfterOwnerDID: c.f.after, Limit: c.f.limit})
	if err != nil {
		return err
	}
	views := make([]syncView, len(rows))
	t := table{v: views, header: []string{"CONNECTOR", "OWNER", "STATUS", "ENTITIES", "LAST SYNCED", "ERROR"}}
	for i := range rows {
		views[i] = syncViewOf(&rows[i])
		t.rows = append(t.rows, []string{quotePart(rows[i].ConnectorName, false), quotePart(rows[i].OwnerDID, false), rows[i].Status,
			itoa(rows[i].EntityCount), cell(rows[i].LastSyncedAt), cell(str(rows[i].Error))})
	}
	return c.print(t)
}

func syncSetStatusFlags(c *cli) {
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "connector (required)")
	c.fs.Var((*partFlag)(&c.f.owner), "owner", "owner DID (required)")
	c.fs.StringVar(&c.f.status, "status", "", "new status: idle, syncing or error (required)")
	c.fs.StringVar(&c.f.errText, "error", "", "error message stored with the status (empty clears it)")
	c.fs.StringVar(&c.f.ifStatus, "if-status", "", "comma-separated statuses the row must hold, else nothing changes")
}

func syncSetStatus(ctx context.Context, c *cli) error {
	if c.f.connector == "" || c.f.owner == "" || c.f.status == "" {
		return fmt.Errorf("%w: sync set-status needs -connector, -owner and -status", errUsage)
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	p := repository.SetSyncStatusParams{Key: repository.ConnectorKey{OwnerDID: c.f.owner, ConnectorName: c.f.connector}, Status: c.f.status,
		IfStatus: splitList(c.f.ifStatus)}
	if c.f.errText != "" {
		p.Error = &c.f.errText
	}
	row, err := repo.SetSyncStatus(ctx, p)
	if err != nil {
		return err
	}
	return c.message(syncViewOf(row), fmt.Sprintf("%s/%s is now %s (version %d)", row.ConnectorName, row.OwnerDID, row.Status, row.Version))
}
