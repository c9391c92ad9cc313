package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// operations records an outbound write, leases it, fails once, re-drives
// it, commits it, and arms a watch that the due sweep then re-verifies.
func operations(ctx context.Context, out io.Writer, repo *repository.Repository) error {
	in := repository.OperationInput{
		CallerDID: "did:example:alice", OperationID: fmt.Sprintf("op-%d", time.Now().UnixNano()),
		NodeKey: "node-1", OwnerDID: "did:example:alice", ConnectorName: "example-crm", Model: "contact",
		Op: "create", AccountKey: "acct-1", Target: "contacts", DeterministicEventID: "evt-1",
		PayloadHash: "sha256:abc", ReissueIntent: models.JSON(`{"name":"Ada"}`),
	}
	_, _, err := repo.RecordOperation(ctx, in)
	if err != nil {
		return err
	}
	claimed, err := repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute, OwnerDID: in.OwnerDID})
	if err != nil || len(claimed) == 0 {
		return fmt.Errorf("claim: %v (claimed %d)", err, len(claimed))
	}
	status := int64(503)
	op, err := repo.RecordOperationFailure(ctx, repository.FailureParams{
		Fence: repository.FenceOf(&claimed[0]), Kind: "http", HTTPStatus: &status})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "operation %s: attempt %d failed (HTTP %d), next attempt in %v\n",
		op.OperationID, op.Attempts, *op.LastHTTPStatus, time.Duration(*op.NextAttemptAt-time.Now().UnixMilli())*time.Millisecond)

	done, err := redrive(ctx, repo, op.Operation)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "operation %s: %s as document %s after %d failed attempt(s)\n",
		done.OperationID, done.State, *done.DocumentID, done.Attempts)

	key := repository.WatchKey{OwnerDID: in.OwnerDID, ConnectorName: in.ConnectorName, Model: in.Model,
		AccountKey: in.AccountKey, SourceID: in.OperationID}
	if _, err := repo.ArmWatch(ctx, repository.ArmWatchParams{WatchKey: key, DocumentID: *done.DocumentID}); err != nil {
		return err
	}
	work, err := repo.ListDueOperations(ctx, repository.DueParams{Now: time.Now(),
		ReadWinners: func(_ context.Context, ids []string) (map[string]string, error) {
			return map[string]string{}, nil
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "due sweep: %d operation(s), %d watch(es) to verify\n", len(work.Operations), len(work.Watches))
	return nil
}

// redrive waits out the backoff, claims the operation again and commits it.
func redrive(ctx context.Context, repo *repository.Repository, op *models.Operation) (*repository.FencedWrite, error) {
	time.Sleep(time.Until(time.UnixMilli(*op.NextAttemptAt + 1)))
	claimed, err := repo.ClaimOperations(ctx, repository.ClaimParams{
		Limit: 1, LeaseFor: time.Minute, OwnerDID: op.OwnerDID})
	if err != nil || len(claimed) == 0 {
		return nil, fmt.Errorf("re-drive: %v (claimed %d)", err, len(claimed))
	}
	doc := "doc-" + op.OperationID
	return repo.CommitOperation(ctx, repository.CommitParams{Fence: repository.FenceOf(&claimed[0]),
		DocumentID: &doc, ResultEntity: models.JSON(`{"id":"crm-42"}`)})
}
