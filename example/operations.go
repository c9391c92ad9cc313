package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

const owner, connector = "did:example:alice", "example-crm"

// operations records an update of a document, leases it, fails once,
// re-drives and commits it (a retried commit is a replay), records a later
// update of the same document, and runs the due sweep.
func operations(ctx context.Context, out io.Writer, repo *repository.Repository, run string) error {
	doc := "doc-" + run
	first, err := writeOnce(ctx, out, repo, "op-"+run+"-a", doc, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   Retrying that commit with the same fence (as after a lost reply) returned the stored row,\n"+
		"   flagged replay=%t, instead of a lost lease.\n", first)
	if _, err := writeOnce(ctx, out, repo, "op-"+run+"-b", doc, false); err != nil {
		return err
	}

	key := repository.WatchKey{OwnerDID: owner, ConnectorName: connector, Model: "contact",
		AccountKey: "acct-1", SourceID: "src-" + run}
	if _, err := repo.ArmWatch(ctx, repository.ArmWatchParams{WatchKey: key, DocumentID: doc}); err != nil {
		return err
	}
	scheduled := 0
	for item, err := range repo.IterDue(ctx, repository.DueParams{Now: time.Now(),
		ReadWinners: func(context.Context, []string) (map[string]string, error) { return nil, nil }}) {
		if err != nil {
			return err
		}
		if item.Kind == repository.DueScheduled && item.Watch.SourceID == key.SourceID {
			scheduled++
		}
	}
	fmt.Fprintf(out, "\n3. The due sweep\n"+
		"   A watch armed on %s asks for its projection to be verified; the sweep streamed it once\n"+
		"   (due by its schedule: %d), with no transaction held open while winners are read.\n", doc, scheduled)
	return nil
}

// writeOnce records an update of doc, then leases and commits it; with
// failFirst the first attempt fails (HTTP 503) and is re-driven.
func writeOnce(ctx context.Context, out io.Writer, repo *repository.Repository, id, doc string, failFirst bool) (bool, error) {
	in := repository.OperationInput{
		CallerDID: owner, OperationID: id, NodeKey: "node-1", OwnerDID: owner, ConnectorName: connector,
		Model: "contact", Op: "update", AccountKey: "acct-1", Target: "contacts", DeterministicEventID: "evt-" + id,
		PayloadHash: "sha256:" + id, ReissueIntent: models.JSON(`{"name":"Ada"}`), DocumentID: &doc,
	}
	if _, _, err := repo.RecordOperation(ctx, in); err != nil {
		return false, err
	}
	fence, err := claimOwn(ctx, repo, id)
	if err != nil {
		return false, err
	}
	if failFirst {
		status := int64(503)
		failed, err := repo.RecordOperationFailure(ctx, repository.FailureParams{Fence: fence, Kind: "http", HTTPStatus: &status})
		if err != nil {
			return false, err
		}
		wait := time.Until(time.UnixMilli(*failed.NextAttemptAt))
		fmt.Fprintf(out, "\n2. An outbound write, leased and fenced\n"+
			"   %s (an update of %s) was leased; attempt %d failed with HTTP %d, so the backoff\n"+
			"   scheduled a re-drive in about %v and released the lease.\n",
			id, doc, failed.Attempts, *failed.LastHTTPStatus, wait.Round(10*time.Millisecond))
		time.Sleep(wait + time.Millisecond)
		if fence, err = claimOwn(ctx, repo, id); err != nil {
			return false, err
		}
	}
	commit := repository.CommitParams{Fence: fence, ResultEntity: models.JSON(`{"id":"crm-42"}`)}
	done, err := repo.CommitOperation(ctx, commit)
	if err != nil {
		return false, err
	}
	if !failFirst {
		fmt.Fprintf(out, "   A later update of the same document, %s, was %s too.\n", id, done.State)
		return false, nil
	}
	fmt.Fprintf(out, "   The re-drive claimed it under a new lease token and %s it, linked to %s.\n", done.State, *done.DocumentID)
	again, err := repo.CommitOperation(ctx, commit)
	if err != nil {
		return false, err
	}
	return again.Replay, nil
}

// claimOwn claims due operations until it holds id's lease.
func claimOwn(ctx context.Context, repo *repository.Repository, id string) (repository.Fence, error) {
	ops, err := repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 100, LeaseFor: time.Minute, OwnerDID: owner})
	if err != nil {
		return repository.Fence{}, err
	}
	for i := range ops {
		if ops[i].OperationID == id {
			return repository.FenceOf(&ops[i]), nil
		}
	}
	return repository.Fence{}, fmt.Errorf("claim %s: not due", id)
}
