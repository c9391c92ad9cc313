package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// candidateBatch is the rows per candidate INSERT: it bounds the memory a
// relist's statements hold, whatever the number of candidates.
const candidateBatch = 1000

// recordRetries bounds re-runs of a receipt transaction that still met a
// taken sequence number (a writer that does not take the partition lock,
// such as another implementation sharing the database).
const recordRetries = 8

// partitionLockNamespace is the first key of the Postgres advisory lock that
// serializes sequence allocation per partition ("rcpt").
const partitionLockNamespace = 0x72637074

// RelistReceipt is the record of one relist of a partition.
type RelistReceipt struct {
	ReceiptKey
	// ModelID is the model the relist covered; required.
	ModelID string
	// Scope, Keep and Predicate describe the relist, as JSON.
	Scope, Keep, Predicate models.JSON
	// SourceFetchHLC is the source fetch's hybrid logical clock; required.
	SourceFetchHLC string
	// Kind is the kind of relist; required.
	Kind string
	// Complete is false for a partial relist, which is never recorded.
	Complete bool
}

// CandidateInput is a document a relist asks to verify.
type CandidateInput struct {
	DocumentID string
	SourceID   *string
	ModelID    string
}

// RecordRelistReceipt records a complete relist and its candidates in one
// transaction, and reports whether it did. An incomplete relist records
// nothing; a receipt already committed is skipped (a replay has nothing left
// to verify). A new receipt takes the next sequence of its partition, so an
// older receipt committing late never moves the checkpoint back. Candidates
// are inserted pending, in batches, leaving existing ones as they are.
//
// Recorders of one partition take turns: on Postgres each takes a
// transaction-scoped advisory lock on the partition before reading the
// highest sequence, so however many record at once, every call lands with
// consecutive sequences instead of starving on the unique constraint (on
// SQLite the immediate write transaction does the same). The receipt row is
// read FOR SHARE, so a replay waits for a commit of the same receipt in
// flight and then sees it committed, instead of adding pending candidates
// under a committed receipt.
func (r *Repository) RecordRelistReceipt(ctx context.Context, rec RelistReceipt, candidates []CandidateInput) (_ bool, err error) {
	ctx, end := r.start(ctx, "RecordRelistReceipt")
	defer end(&err)
	if err := validateReceipt(rec, candidates); err != nil {
		return false, fmt.Errorf("record relist receipt: %w", err)
	}
	if err := r.inScope(ctx, rec.OwnerDID, rec.ConnectorName); err != nil {
		return false, fmt.Errorf("record relist receipt: %w", err)
	}
	if !rec.Complete {
		return false, nil
	}
	for attempt := 1; ; attempt++ {
		recorded, err := r.recordReceiptOnce(ctx, rec, candidates)
		switch {
		case err == nil:
			return recorded, nil
		case !r.isDuplicateKey(err):
			return false, fmt.Errorf("record relist receipt %s: %w", rec.ReceiptKey, err)
		case attempt == recordRetries:
			return false, fmt.Errorf("record relist receipt %s: sequence still taken after %d attempts: %w",
				rec.ReceiptKey, attempt, ErrRetriesExhausted)
		}
		r.emit(ctx, EventReceiptRetry, 1, "")
	}
}

func (r *Repository) recordReceiptOnce(ctx context.Context, rec RelistReceipt, candidates []CandidateInput) (recorded bool, err error) {
	now := r.nowMillis()
	err = r.conn(ctx).Transaction(func(tx *gorm.DB) error {
		if err := r.lockPartition(tx, rec.PartitionKey); err != nil {
			return err
		}
		q := tx.Scopes(rec.ReceiptKey.scope)
		q = r.dialect.LockRows(q, true, false)
		var existing []models.SweepReceipt
		if err := q.Limit(1).Find(&existing).Error; err != nil {
			return err
		}
		if len(existing) == 1 && existing[0].CommittedAt != nil {
			return nil
		}
		if len(existing) == 0 {
			if err := insertReceipt(tx, rec, now); err != nil {
				return err
			}
		}
		recorded = true
		return insertCandidates(tx, r.dialect, rec.ReceiptKey, candidates, now)
	})
	return recorded, err
}

// lockPartition serializes recorders of one partition until tx ends. The
// key hashes the schema too, so equal partitions of different schemas do not
// wait on each other; a hash collision only makes two partitions take turns.
func (r *Repository) lockPartition(tx *gorm.DB, k PartitionKey) error {
	return r.dialect.XactLock(tx, partitionLockNamespace, "\x1f"+k.OwnerDID+"\x1f"+k.ConnectorName+"\x1f"+k.Partition)
}

func insertReceipt(tx *gorm.DB, rec RelistReceipt, now int64) error {
	var latest *int64
	err := tx.Model(&models.SweepReceipt{}).Scopes(rec.PartitionKey.scope).
		Select("MAX(sequence)").Scan(&latest).Error
	if err != nil {
		return err
	}
	seq := int64(1)
	if latest != nil {
		seq = *latest + 1
	}
	return tx.Create(&models.SweepReceipt{
		OwnerDID: rec.OwnerDID, ConnectorName: rec.ConnectorName, Partition: rec.Partition,
		Provenance: rec.Provenance, Sequence: seq, ModelID: rec.ModelID, Scope: rec.Scope, Keep: rec.Keep,
		SourceFetchHLC: rec.SourceFetchHLC, Predicate: rec.Predicate, Kind: rec.Kind, Complete: 1, CreatedAt: now,
	}).Error
}

// insertCandidates inserts the candidates pending, candidateBatch rows per
// statement (store.InsertCandidates), leaving existing ones as they are; the
// rows' document, source and model ids travel as a row source (one JSON
// array per column on PostgreSQL, one of objects on SQLite; see jsonTable).
//
// The rows go in document order, each document once: its first occurrence
// in the input, the one the seed's insert per candidate (ON CONFLICT DO
// NOTHING, in input order) keeps. The key ends with the document, so each
// batch extends the key's index ranges in order instead of landing on pages
// all over them.
//
// When no candidate of the receipt's key exists yet (a new relist; one
// probe of the key, under the partition lock every recorder holds), nothing
// can conflict, and the statements are plain INSERTs: on PostgreSQL, ON
// CONFLICT inserts each row speculatively (a probe of the key, the insert,
// then its confirmation), a fifth of a batch's time. The probe is the key's
// alone, without the repository's scopes: a key is unique whatever they
// admit. A writer that
// inserts candidates without the partition lock (another implementation
// sharing the database) can still race the probe: its row makes a plain
// INSERT fail on the key, the transaction rolls back, and the retry
// (RecordRelistReceipt re-runs a transaction that met a taken key) finds
// the key's rows and keeps them as they are.
func insertCandidates(tx *gorm.DB, d dialect.Dialect, key ReceiptKey, in []CandidateInput, now int64) error {
	taken, err := exists(tx.Session(&gorm.Session{NewDB: true}).Model(&models.SweepCandidate{}).Scopes(key.scope))
	if err != nil {
		return err
	}
	order := inDocumentOrder(in)
	cols := []jsonrows.Col{jsonrows.Text("v_document_id"), jsonrows.Text("v_source_id"), jsonrows.Text("v_model_id")}
	rows := make([][]any, 0, min(candidateBatch, len(order)))
	for start := 0; start < len(order); start += candidateBatch {
		rows = rows[:0]
		for _, i := range order[start:min(start+candidateBatch, len(order))] {
			c := in[i]
			rows = append(rows, []any{c.DocumentID, c.SourceID, c.ModelID})
		}
		from, vars, err := jsonTable(d.Name(), cols, rows)
		if err != nil {
			return err
		}
		err = store.InsertCandidates(tx, key.OwnerDID, key.ConnectorName, key.Partition, key.Provenance,
			models.CandidatePending, now, from, vars, taken)
		if err != nil {
			return err
		}
	}
	return nil
}

// inDocumentOrder returns the indexes of in's candidates by document id,
// each document's first occurrence only.
func inDocumentOrder(in []CandidateInput) []int {
	order := make([]int, len(in))
	for i := range order {
		order[i] = i
	}
	byDocument := func(a, b int) int { return strings.Compare(in[a].DocumentID, in[b].DocumentID) }
	if !slices.IsSortedFunc(order, byDocument) {
		// Stable: among equal documents the first occurrence stays first.
		slices.SortStableFunc(order, byDocument)
	}
	return slices.CompactFunc(order, func(a, b int) bool { return in[a].DocumentID == in[b].DocumentID })
}

func validateReceipt(rec RelistReceipt, candidates []CandidateInput) error {
	if err := rec.ReceiptKey.validate(); err != nil {
		return err
	}
	if err := requireKeys("model id", rec.ModelID, "source fetch HLC", rec.SourceFetchHLC, "kind", rec.Kind); err != nil {
		return err
	}
	if err := requireJSON(rec.Scope, rec.Keep, rec.Predicate); err != nil {
		return err
	}
	if err := errors.Join(requireText("receipt", rec), requireText("candidates", candidates)); err != nil {
		return err
	}
	for i, c := range candidates {
		if err := requireKeys("document id", c.DocumentID, "model id", c.ModelID); err != nil {
			return fmt.Errorf("candidate %d: %w", i, err)
		}
	}
	return nil
}

// ListSweepReceipts returns the uncommitted receipts of a connector and
// owner, oldest first.
func (r *Repository) ListSweepReceipts(ctx context.Context, k ConnectorKey) (_ []models.SweepReceipt, err error) {
	ctx, end := r.start(ctx, "ListSweepReceipts")
	defer end(&err)
	owner, connector := k.OwnerDID, k.ConnectorName
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("list sweep receipts: %w", err)
	}
	var rows []models.SweepReceipt
	err = r.conn(ctx).Scopes(scopes.Owner(owner), scopes.Connector(connector)).
		Where(store.Uncommitted).Order("created_at").Order("sequence").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list sweep receipts: %w", err)
	}
	return rows, nil
}
