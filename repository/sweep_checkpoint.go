package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CheckpointCommit is the result of a committed receipt.
type CheckpointCommit struct {
	// Sequence is the receipt's sequence in its partition.
	Sequence int64
	// Advanced is false when a newer receipt already holds the checkpoint:
	// the receipt is committed, but the checkpoint never moves back.
	Advanced bool
}

// CommitSweepCheckpoint commits a receipt in one transaction: only a
// complete, uncommitted receipt with no unresolved candidate, and no
// unresolved candidate of an earlier receipt of the partition (a later relist
// must not advance past it). It moves the partition's checkpoint to the
// receipt if that is newer, deletes the receipt's applied candidates (refused
// ones keep their error for inspection), and marks the receipt committed. A
// refusal is a *CheckpointRefusedError and changes nothing.
func (r *Repository) CommitSweepCheckpoint(ctx context.Context, k ReceiptKey) (_ *CheckpointCommit, err error) {
	ctx, end := r.start(ctx, "CommitSweepCheckpoint")
	defer end(&err)
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("commit sweep checkpoint: %w", err)
	}
	var res *CheckpointCommit
	err = r.conn(ctx).Transaction(func(tx *gorm.DB) error {
		receipt, err := r.commitCheck(tx, k)
		if err != nil {
			return err
		}
		res = &CheckpointCommit{Sequence: receipt.Sequence}
		res.Advanced, err = r.commitApply(tx, k, receipt.Sequence)
		return err
	})
	var refused *CheckpointRefusedError
	if errors.As(err, &refused) {
		r.emit(ctx, EventCheckpointRefused, 1, refused.Reason)
		return nil, refused // already names the receipt and the reason
	}
	if err != nil {
		return nil, fmt.Errorf("commit sweep checkpoint %s: %w", k, err)
	}
	return res, nil
}

// commitCheck locks the receipt and returns it, or the refusal.
func (r *Repository) commitCheck(tx *gorm.DB, k ReceiptKey) (*models.SweepReceipt, error) {
	refuse := func(reason string) error { return &CheckpointRefusedError{Receipt: k, Reason: reason} }
	q := tx.Scopes(k.scope)
	q = r.dialect.LockRows(q, false, false)
	var receipt models.SweepReceipt
	if err := q.Take(&receipt).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, refuse(RefusedReceiptMissing)
		}
		return nil, err
	}
	switch {
	case receipt.Complete != 1:
		return nil, refuse(RefusedIncomplete)
	case receipt.CommittedAt != nil:
		return nil, refuse(RefusedAlreadyCommitted)
	}
	unresolved, err := exists(tx.Model(&models.SweepCandidate{}).
		Scopes(k.scope, scopes.NotIn("state", resolvedStates...)))
	if err != nil || unresolved {
		return nil, errors.Join(err, refuseIf(unresolved, refuse(RefusedUnresolved)))
	}
	// Unqualified columns throughout, so the repository's scopes apply.
	earlierReceipts := tx.Model(&models.SweepReceipt{}).Select("provenance").
		Scopes(k.PartitionKey.scope).Where(store.SequenceBefore(receipt.Sequence))
	earlier, err := exists(tx.Model(&models.SweepCandidate{}).
		Scopes(k.PartitionKey.scope, scopes.NotIn("state", resolvedStates...)).
		Where(store.ProvenanceIn(earlierReceipts)))
	if err != nil || earlier {
		return nil, errors.Join(err, refuseIf(earlier, refuse(RefusedEarlierUnresolved)))
	}
	return &receipt, nil
}

// commitApply moves the checkpoint forward (never back), discards applied
// candidates and marks the receipt committed.
func (r *Repository) commitApply(tx *gorm.DB, k ReceiptKey, seq int64) (advanced bool, err error) {
	now := r.nowMillis()
	cp := tx.Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "owner_did"}, {Name: "connector_name"}, {Name: "partition"}},
		DoUpdates: clause.Assignments(map[string]any{
			"provenance": k.Provenance, "receipt_sequence": seq, "updated_at": now,
		}),
		Where: clause.Where{Exprs: []clause.Expression{store.Below(
			tx.Statement.Quote(models.SweepCheckpoint{}.TableName()+".receipt_sequence"), seq)}},
	}).Create(&models.SweepCheckpoint{OwnerDID: k.OwnerDID, ConnectorName: k.ConnectorName,
		Partition: k.Partition, Provenance: k.Provenance, ReceiptSequence: seq, UpdatedAt: now})
	if cp.Error != nil {
		return false, cp.Error
	}
	err = tx.Scopes(k.scope, scopes.State(models.CandidateApplied)).Delete(&models.SweepCandidate{}).Error
	if err != nil {
		return false, err
	}
	err = tx.Model(&models.SweepReceipt{}).Scopes(k.scope).Update("committed_at", now).Error
	return cp.RowsAffected > 0, err
}

// GetSweepCheckpoint returns the partition's checkpoint: the provenance and
// sequence of the newest committed receipt and when it was committed.
func (r *Repository) GetSweepCheckpoint(ctx context.Context, k PartitionKey) (_ *models.SweepCheckpoint, err error) {
	ctx, end := r.start(ctx, "GetSweepCheckpoint")
	defer end(&err)
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("get sweep checkpoint: %w", err)
	}
	return takeOne[models.SweepCheckpoint](ctx, r, "sweep checkpoint", k, k.scope)
}

// exists reports whether q matches a row, reading at most one.
func exists(q *gorm.DB) (bool, error) {
	var n []int
	err := q.Select("1").Limit(1).Find(&n).Error
	return len(n) > 0, err
}

func refuseIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}
