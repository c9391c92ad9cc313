package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// cursor is the connector's own checkpoint document.
type cursor struct {
	Page  int `json:"page"`
	Pages int `json:"pages"`
}

// syncProgress runs four concurrent sync workers that each record pages of
// progress on one row by compare-and-swap; no page is lost.
func syncProgress(ctx context.Context, out io.Writer, repo *repository.Repository, _ string) error {
	const connector, owner, workers, pages = "example-crm", "did:example:alice", 4, 5
	if err := repo.DeleteSyncState(ctx, repository.ConnectorKey{OwnerDID: owner, ConnectorName: connector}); err != nil {
		return err
	}
	recompute := func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
		var c cursor
		if cur != nil {
			if err := cur.Checkpoint.Decode(&c); err != nil {
				return repository.SyncProgressResult{}, err
			}
		}
		c.Page++
		c.Pages++
		doc, err := models.NewJSON(c)
		return repository.SyncProgressResult{
			Checkpoint: doc, LastSyncedAt: time.Now().UTC().Format(time.RFC3339), EntityCount: int64(c.Pages * 10),
		}, err
	}
	retries := 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*pages)
	for range workers {
		wg.Go(func() {
			for range pages {
				errs <- repo.UpdateSyncProgress(ctx, repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: owner, ConnectorName: connector},
					Recompute: recompute, MaxRetries: &retries})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	st, err := repo.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: owner, ConnectorName: connector})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n1. Sync progress by compare-and-swap\n"+
		"   %d workers each recorded %d pages on one sync-state row (%s/%s).\n"+
		"   Each write was guarded on the version it read, so a worker that lost a race re-read and\n"+
		"   recomputed instead of overwriting:\n"+
		"   checkpoint %s, entities %d, version %d (the insert, then one bump per page),\n"+
		"   status %s (the progress path never writes the workflow's status).\n",
		workers, pages, connector, owner, st.Checkpoint, st.EntityCount, st.Version, st.Status)
	return nil
}
