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
func sweeps(ctx context.Context, out io.Writer, repo *repository.Repository, run string) error {
	key := repository.ReceiptKey{
		PartitionKey: repository.PartitionKey{OwnerDID: owner, ConnectorName: connector, Partition: "contacts"},
		Provenance:   "relist-" + run,
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
	fmt.Fprintf(out, "\n4. A relist sweep\n"+
		"   A complete relist of partition %s recorded receipt %d with %d candidates; each was verified\n"+
		"   (present, absent, cancelled) and applied, and only then could the checkpoint commit:\n"+
		"   it now stands at receipt %d (advanced: %t), and it never moves back.\n",
		key.Partition, res.Sequence, len(docs), cp.ReceiptSequence, res.Advanced)

	n, err := repo.CollectFinishedOperations(ctx, repository.CollectParams{Before: time.Now().Add(time.Minute), Limit: 100})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n5. Retention\n"+
		"   One pass deleted %d finished operation(s): the first update of the document, which the\n"+
		"   later one supersedes. The newest finished row of a document is always kept.\n", n)
	return nil
}
