package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
		return r.insertCandidates(tx, rec.ReceiptKey, candidates, now)
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
// statement (store.InsertCandidates), leaving existing ones as they are;
// the rows' document, source and model ids travel as a row source (one
// JSON array per column on PostgreSQL, one of objects on SQLite; see
// jsonTable).
//
// The seed inserts candidate by candidate, in input order, ON CONFLICT DO
// NOTHING: a document named twice keeps its first occurrence, and a row
// the key had already stays as it is. That is the general path here too,
// in batches. Its fast case is a new relist: when one probe of the
// receipt's key (under the partition lock every recorder holds; unscoped,
// as the key's uniqueness is) finds no candidate, the rows go in document
// order, each document once (its first occurrence), as plain INSERTs. On
// PostgreSQL ON CONFLICT inserts each row speculatively (a probe of the
// key, the insert, its confirmation), a fifth of a batch's time; and rows
// in key order extend the key's index ranges instead of landing all over
// them. The fast case runs under a savepoint of its own: if it meets the
// key anyway (a writer that skips the partition lock committed a candidate
// after the probe, a snapshot older than that writer, or a document
// column whose collation equates ids that differ by byte), it is rolled
// back to the savepoint and the general path runs, so the call stores
// what the seed's would, or fails as it would, and the caller's
// transaction is never left aborted by it.
func (r *Repository) insertCandidates(tx *gorm.DB, key ReceiptKey, in []CandidateInput, now int64) error {
	taken, err := exists(tx.Session(&gorm.Session{NewDB: true}).Model(&models.SweepCandidate{}).Scopes(key.scope))
	if err != nil {
		return err
	}
	if !taken {
		if err := tx.SavePoint(candidatesSavepoint).Error; err != nil {
			return err
		}
		err := r.insertCandidateRows(tx, key, in, inDocumentOrder(in), now, false)
		if err == nil || !r.isDuplicateKey(err) {
			return err
		}
		if err := tx.RollbackTo(candidatesSavepoint).Error; err != nil {
			return err
		}
		r.emit(tx.Statement.Context, EventReceiptFallback, 1, "")
	}
	return r.insertCandidateRows(tx, key, in, positions(len(in)), now, true)
}

// candidatesSavepoint names the savepoint of insertCandidates' fast case.
const candidatesSavepoint = "connstore_candidates"

// insertCandidateRows inserts in's candidates at the indexes order, in
// that order, candidateBatch rows per statement; keep leaves rows whose key
// exists as they are (see store.InsertCandidates).
func (r *Repository) insertCandidateRows(tx *gorm.DB, key ReceiptKey, in []CandidateInput, order []int, now int64, keep bool) error {
	cols := []jsonrows.Col{jsonrows.Text("v_document_id"), jsonrows.Text("v_source_id"), jsonrows.Text("v_model_id")}
	rows := make([][]any, 0, min(candidateBatch, len(order)))
	for start := 0; start < len(order); start += candidateBatch {
		rows = rows[:0]
		for _, i := range order[start:min(start+candidateBatch, len(order))] {
			c := in[i]
			rows = append(rows, []any{c.DocumentID, c.SourceID, c.ModelID})
		}
		from, vars, err := jsonTable(r.dialect.Name(), cols, rows)
		if err != nil {
			return err
		}
		err = store.InsertCandidates(tx, key.OwnerDID, key.ConnectorName, key.Partition, key.Provenance,
			models.CandidatePending, now, from, vars, keep)
		if err != nil {
			return err
		}
	}
	return nil
}

// inDocumentOrder returns the indexes of in's candidates by document id,
// each document's first occurrence only.
func inDocumentOrder(in []CandidateInput) []int {
	order := positions(len(in))
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
