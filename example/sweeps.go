package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// sweeps records a complete relist with three candidates, verifies and
// applies them, commits the checkpoint, and runs a retention pass.
func sweeps(ctx context.Context, out io.Writer, repo *repository.Repository) error {
	key := repository.ReceiptKey{
		PartitionKey: repository.PartitionKey{OwnerDID: "did:example:alice", ConnectorName: "example-crm", Partition: "contacts"},
		Provenance:   fmt.Sprintf("relist-%d", time.Now().UnixNano()),
	}
	docs := []repository.CandidateInput{{DocumentID: "doc-1", ModelID: "contact"},
		{DocumentID: "doc-2", ModelID: "contact"}, {DocumentID: "doc-3", ModelID: "contact"}}
	if _, err := repo.RecordRelistReceipt(ctx, repository.RelistReceipt{ReceiptKey: key, ModelID: "contact",
		Scope: models.JSON(`{"list":"all"}`), SourceFetchHLC: "hlc-1", Kind: "full", Complete: true}, docs); err != nil {
		return err
	}
	for i, d := range docs {
		cand := repository.CandidateKey{ReceiptKey: key, DocumentID: d.DocumentID}
		outcome := []string{models.CandidatePresent, models.CandidateAbsent, models.CandidateCancelled}[i]
		if _, err := repo.RecordSweepOutcome(ctx, repository.SweepOutcome{CandidateKey: cand, Outcome: outcome}); err != nil {
			return err
		}
		if _, err := repo.MarkSweepCandidateApplied(ctx, cand); err != nil {
			return err
		}
	}
	res, err := repo.CommitSweepCheckpoint(ctx, key)
	if err != nil {
		return err
	}
	cp, err := repo.GetSweepCheckpoint(ctx, key.PartitionKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sweep: receipt %d of partition %s committed (advanced %t); checkpoint at receipt %d\n",
		res.Sequence, key.Partition, res.Advanced, cp.ReceiptSequence)

	n, err := repo.CollectFinishedOperations(ctx, repository.CollectParams{Before: time.Now().Add(time.Minute), Limit: 100})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "retention: collected %d superseded operation(s)\n", n)
	return nil
}
