package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// candidateBatch is the rows per candidate INSERT: 13 columns stay well
// under both databases' bound-parameter limits.
const candidateBatch = 1000

// recordRetries bounds re-runs of a receipt transaction that lost a race
// for its sequence number (the unique (partition, sequence) constraint).
const recordRetries = 16

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
func (r *Repository) RecordRelistReceipt(ctx context.Context, rec RelistReceipt, candidates []CandidateInput) (bool, error) {
	if err := validateReceipt(rec, candidates); err != nil {
		return false, fmt.Errorf("record relist receipt: %w", err)
	}
	if !rec.Complete {
		return false, nil
	}
	for attempt := 1; ; attempt++ {
		recorded, err := r.recordReceiptOnce(ctx, rec, candidates)
		if err != nil && r.isDuplicateKey(err) && attempt < recordRetries {
			continue // a concurrent recorder took the sequence: read max again
		}
		if err != nil {
			return false, fmt.Errorf("record relist receipt %v: %w", rec.ReceiptKey, err)
		}
		return recorded, nil
	}
}

func (r *Repository) recordReceiptOnce(ctx context.Context, rec RelistReceipt, candidates []CandidateInput) (recorded bool, err error) {
	now := r.nowMillis()
	err = r.conn(ctx).Transaction(func(tx *gorm.DB) error {
		var existing []models.SweepReceipt
		if err := tx.Scopes(rec.ReceiptKey.scope).Limit(1).Find(&existing).Error; err != nil {
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
		return insertCandidates(tx, rec.ReceiptKey, candidates, now)
	})
	return recorded, err
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

func insertCandidates(tx *gorm.DB, key ReceiptKey, in []CandidateInput, now int64) error {
	for start := 0; start < len(in); start += candidateBatch {
		part := in[start:min(start+candidateBatch, len(in))]
		rows := make([]models.SweepCandidate, len(part))
		for i, c := range part {
			rows[i] = models.SweepCandidate{
				OwnerDID: key.OwnerDID, ConnectorName: key.ConnectorName, Partition: key.Partition,
				Provenance: key.Provenance, DocumentID: c.DocumentID, SourceID: c.SourceID, ModelID: c.ModelID,
				State: models.CandidatePending, UpdatedAt: now,
			}
		}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
			return err
		}
	}
	return nil
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
	for i, c := range candidates {
		if c.DocumentID == "" || c.ModelID == "" {
			return invalid("candidate %d has an empty document or model id", i)
		}
	}
	return nil
}

// ListSweepReceipts returns the uncommitted receipts of a connector and
// owner, oldest first.
func (r *Repository) ListSweepReceipts(ctx context.Context, owner, connector string) ([]models.SweepReceipt, error) {
	if err := requireKeys("owner", owner, "connector", connector); err != nil {
		return nil, fmt.Errorf("list sweep receipts: %w", err)
	}
	var rows []models.SweepReceipt
	err := r.conn(ctx).Scopes(scopes.Owner(owner), scopes.Connector(connector)).
		Where("committed_at IS NULL").Order("created_at").Order("sequence").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list sweep receipts: %w", err)
	}
	return rows, nil
}
