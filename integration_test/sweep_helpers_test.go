package integrationtest

import (
	"fmt"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

var partition = repository.PartitionKey{OwnerDID: "owner", ConnectorName: "crm", Partition: "contacts"}

func receiptKey(provenance string) repository.ReceiptKey {
	return repository.ReceiptKey{PartitionKey: partition, Provenance: provenance}
}

func candKey(provenance, doc string) repository.CandidateKey {
	return repository.CandidateKey{ReceiptKey: receiptKey(provenance), DocumentID: doc}
}

func receipt(provenance string) repository.RelistReceipt {
	return repository.RelistReceipt{ReceiptKey: receiptKey(provenance), ModelID: "contact",
		Scope: models.JSON(`{"list":"all"}`), Keep: models.JSON(`["id"]`), SourceFetchHLC: "hlc-1",
		Kind: "relist", Complete: true}
}

func cands(docs ...string) []repository.CandidateInput {
	out := make([]repository.CandidateInput, len(docs))
	for i, d := range docs {
		out[i] = repository.CandidateInput{DocumentID: d, SourceID: models.StrPtr("src-" + d), ModelID: "contact"}
	}
	return out
}

func manyCands(n int) []repository.CandidateInput {
	docs := make([]string, n)
	for i := range docs {
		docs[i] = fmt.Sprintf("doc-%06d", i)
	}
	return cands(docs...)
}

func recordReceipt(t *testing.T, e *env, provenance string, docs ...string) {
	t.Helper()
	ok, err := e.repo.RecordRelistReceipt(ctx(t), receipt(provenance), cands(docs...))
	require.NoError(t, err)
	require.True(t, ok)
}

func candidate(t *testing.T, e *env, provenance, doc string) models.SweepCandidate {
	t.Helper()
	var c models.SweepCandidate
	require.NoError(t, e.db.Where(`provenance = ? AND document_id = ?`, provenance, doc).Take(&c).Error)
	return c
}

func setState(t *testing.T, e *env, provenance, doc, state string) {
	t.Helper()
	require.NoError(t, e.db.Model(&models.SweepCandidate{}).
		Where(`provenance = ? AND document_id = ?`, provenance, doc).Update("state", state).Error)
}

// sweepTables is every sweep row, for before/after comparisons.
type sweepTables struct {
	Receipts    []models.SweepReceipt
	Candidates  []models.SweepCandidate
	Checkpoints []models.SweepCheckpoint
}

func sweepSnapshot(t *testing.T, e *env) sweepTables {
	t.Helper()
	var s sweepTables
	require.NoError(t, e.db.Order("provenance").Find(&s.Receipts).Error)
	require.NoError(t, e.db.Order("provenance, document_id").Find(&s.Candidates).Error)
	require.NoError(t, e.db.Order(`"partition"`).Find(&s.Checkpoints).Error)
	return s
}
