package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/internal/flow"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// MaxWeight is the most an operation may weigh (OperationInput.Weight).
const MaxWeight = flow.MaxWeight

// OperationInput is an outbound write about to be attempted.
//
// Every string field is required: non-empty valid UTF-8 without NUL, at
// most MaxKeyLength bytes. The example values are a CRM
// connector creating a contact.
type OperationInput struct {
	// CallerDID is the DID of the identity the write is made for, e.g.
	// "did:key:z6MkCaller". With OperationID it is the operation's key.
	CallerDID string
	// OperationID is the caller's idempotency key for the write, e.g.
	// "op-01J9Z…": recording it again is a replay, never a second write.
	OperationID string
	// NodeKey is the key of the graph node the write comes from, e.g.
	// "contact:42"; stored as given.
	NodeKey string
	// OwnerDID is the DID of the user whose connected account is written,
	// e.g. "did:key:z6MkOwner"; scopes and listings select by it.
	OwnerDID string
	// ConnectorName names the connector, e.g. "hubspot".
	ConnectorName string
	// Model is the data model of the written document, e.g. "Contact".
	Model string
	// Op is the kind of write, e.g. "create", "update" or "delete". It is
	// free text, as in the seed: the store never branches on it.
	Op string
	// AccountKey identifies the provider account written to, e.g. the
	// portal or workspace id "portal-123".
	AccountKey string
	// Target is the provider-side destination, e.g. "crm/v3/objects/contacts".
	Target string
	// DeterministicEventID is the id of the event the write answers,
	// derived from it so that the same event always yields the same id,
	// e.g. "evt-9f2c…".
	DeterministicEventID string
	// PayloadHash identifies the payload, e.g. a SHA-256 hex digest;
	// re-recording must match it.
	PayloadHash string
	// SourceID is the provider-side id, when known, e.g. "hs-contact-4711"
	// for an update of a record the provider already has; nil for a create.
	SourceID *string
	// DocumentID is the document the write acts on, when it already exists
	// (an update or a delete). Recording it links even an operation that
	// ends dead to its document, so retention keeps the newest failure a
	// document shows. A create leaves it nil and its commit sets it.
	DocumentID *string
	// ReissueIntent is the JSON needed to re-drive the write; required,
	// e.g. {"method":"POST","path":"/contacts","body":{"name":"Ada"}}: what
	// a worker needs to make the same outbound write again.
	ReissueIntent models.JSON
	// NotBefore, when set, is the earliest time the operation may be
	// claimed (run-at): it is stored as the operation's next attempt time,
	// the column every claim is bounded by, so a scheduled operation costs
	// a claim nothing until it is due. nil means due at once. A replay of
	// the record keeps the stored time.
	NotBefore *time.Time
	// Weight is how many units of its account's rate (and its connector's)
	// the operation costs when it starts, for an API that charges by
	// points rather than calls (a search 10, a read 1): 0 means 1; at most
	// MaxWeight. It is declared here, with the record, because a claim
	// spends it before any handler runs: that is what keeps a rate exact.
	// Caps count operations, not weight. An operation heavier than its
	// limiter's burst starts once the limiter is full and its overdraft is
	// waited out after (the alternative, never starting, would wedge the
	// account). A replay keeps the stored weight.
	Weight int64
}

// RecordOperation records an attempted operation idempotently by
// (caller, operation id). Recording the same payload hash again returns the
// stored row with created false; a different payload hash, or a document id
// other than the stored one, returns ErrPayloadConflict and changes nothing.
func (r *Repository) RecordOperation(ctx context.Context, in OperationInput) (op *models.Operation, created bool, err error) {
	ctx, end := r.start(ctx, "RecordOperation")
	defer end(&err)
	if err := validateOperationInput(in); err != nil {
		return nil, false, fmt.Errorf("record operation: %w", err)
	}
	if err := r.inScope(ctx, in.OwnerDID, in.ConnectorName); err != nil {
		return nil, false, fmt.Errorf("record operation: %w", err)
	}
	row := r.operationRow(in)
	tx := r.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(row)
	if tx.Error != nil {
		return nil, false, fmt.Errorf("record operation %s/%s: %w", in.CallerDID, in.OperationID, tx.Error)
	}
	if tx.RowsAffected > 0 {
		return row, true, nil
	}
	existing, err := r.getOperation(ctx, OperationKey{CallerDID: in.CallerDID, OperationID: in.OperationID})
	if err != nil {
		return nil, false, fmt.Errorf("record operation: %w", err)
	}
	if err := sameRecord(existing, in); err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// operationRow is the row an input records, attempted and due at once. An
// explicit time rather than NULL keeps claim order (next_attempt_at
// ascending) the same on both databases, which place NULLs at opposite ends.
func (r *Repository) operationRow(in OperationInput) *models.Operation {
	now := r.nowMillis()
	next := now
	if in.NotBefore != nil {
		next = in.NotBefore.UnixMilli()
	}
	return &models.Operation{
		CallerDID: in.CallerDID, OperationID: in.OperationID, NodeKey: in.NodeKey, OwnerDID: in.OwnerDID,
		ConnectorName: in.ConnectorName, Model: in.Model, Op: in.Op, AccountKey: in.AccountKey,
		Target: in.Target, SourceID: in.SourceID, DeterministicEventID: in.DeterministicEventID,
		PayloadHash: in.PayloadHash, ReissueIntent: in.ReissueIntent, DocumentID: in.DocumentID,
		State: models.OperationAttempted, NextAttemptAt: &next, CreatedAt: now, UpdatedAt: now,
		Weight: max(in.Weight, 1),
	}
}

// sameRecord refuses a replayed record that does not match the stored one.
func sameRecord(existing *models.Operation, in OperationInput) error {
	if existing.PayloadHash != in.PayloadHash {
		return fmt.Errorf("record operation %s/%s: %w (stored %s, given %s)",
			in.CallerDID, in.OperationID, ErrPayloadConflict, existing.PayloadHash, in.PayloadHash)
	}
	if in.DocumentID != nil && !equalPtr(existing.DocumentID, in.DocumentID) {
		return fmt.Errorf("record operation %s/%s: %w (stored document %s, given %s)",
			in.CallerDID, in.OperationID, ErrPayloadConflict, ptrString(existing.DocumentID), *in.DocumentID)
	}
	return nil
}

// recordBatch is the rows per INSERT of RecordOperations: at 29 columns a
// row it stays under SQLite's 32,766 bound parameters and PostgreSQL's
// 65,535.
const recordBatch = 1000

// RecordOutcome is one operation's result in RecordOperations.
type RecordOutcome struct {
	// Operation is the stored row; nil when Err is set.
	Operation *models.Operation
	// Created is false for an operation recorded before (same payload).
	Created bool
	// Err is ErrPayloadConflict for a replay with another payload.
	Err error
}

// RecordOperations records many operations, each as RecordOperation would:
// idempotent by (caller, operation id), a different payload an
// ErrPayloadConflict in its outcome. A bad item (the single write's
// validation, item by item) fails the whole call with ErrInvalidInput and
// records nothing. The inserts and the read-back of every row run in one
// transaction (a savepoint in the caller's), so an error leaves nothing
// written that the caller was not told of. Scopes are checked once for the
// whole batch, and the read-back is one statement whatever the batch size.
func (r *Repository) RecordOperations(ctx context.Context, ins []OperationInput) (_ []RecordOutcome, err error) {
	ctx, end := r.start(ctx, "RecordOperations")
	defer end(&err)
	rows := make([]models.Operation, len(ins))
	fences := make([]Fence, len(ins))
	keys := make([]scopeKey, 0, 1)
	seen := map[opKey]bool{}
	seenScope := map[scopeKey]bool{}
	for i, in := range ins {
		if err := validateOperationInput(in); err != nil {
			return nil, fmt.Errorf("record operations: item %d: %w", i, err)
		}
		k := opKey{in.CallerDID, in.OperationID}
		if seen[k] {
			return nil, fmt.Errorf("record operations: %w", invalid("operation %s/%s appears twice", k.caller, k.id))
		}
		seen[k] = true
		if sk := (scopeKey{in.OwnerDID, in.ConnectorName}); !seenScope[sk] {
			seenScope[sk] = true
			keys = append(keys, sk)
		}
		rows[i], fences[i] = *r.operationRow(in), Fence{CallerDID: in.CallerDID, OperationID: in.OperationID}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if err := r.allInScope(ctx, keys); err != nil {
		return nil, fmt.Errorf("record operations: %w", err)
	}
	var stored map[opKey]*models.Operation
	err = r.Transaction(ctx, func(_ *gorm.DB, tx *Repository) error {
		// The plugin seeds each row's incarnation before the INSERT: a
		// stored row with that incarnation is one this call created.
		if err := insertInDocumentOrder(tx.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}), rows); err != nil {
			return err
		}
		stored, err = tx.readFenced(ctx, fences)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record operations: %w", err)
	}
	out := make([]RecordOutcome, len(ins))
	for i, in := range ins {
		op := stored[opKey{in.CallerDID, in.OperationID}]
		switch {
		case op == nil:
			out[i].Err = fmt.Errorf("record operation %s/%s: %w", in.CallerDID, in.OperationID, ErrNotFound)
		case equalPtr(op.Incarnation, rows[i].Incarnation):
			out[i] = RecordOutcome{Operation: op, Created: true}
		default:
			if out[i].Err = sameRecord(op, in); out[i].Err == nil {
				out[i].Operation = op
			}
		}
	}
	return out, nil
}

// GetOperation returns one operation, or ErrNotFound.
func (r *Repository) GetOperation(ctx context.Context, k OperationKey) (_ *models.Operation, err error) {
	ctx, end := r.start(ctx, "GetOperation")
	defer end(&err)
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("get operation: %w", err)
	}
	return r.getOperation(ctx, k)
}

// getOperation reads one operation on the primary, for GetOperation and
// for the calls that explain or return a row (without a nested span).
func (r *Repository) getOperation(ctx context.Context, k OperationKey) (*models.Operation, error) {
	var rows []models.Operation
	err := findOps(r.primary(ctx).Scopes(scopes.Caller(k.CallerDID), scopes.Eq("operation_id", k.OperationID)).Limit(1), &rows)
	switch {
	case err != nil:
		return nil, fmt.Errorf("get operation %v: %w", k, err)
	case len(rows) == 0:
		return nil, fmt.Errorf("get operation %v: %w", k, ErrNotFound)
	}
	return &rows[0], nil
}

// OperationCursor is the position after which ListOperationsByOwner
// resumes: the last row's record time and record-order number (Seq). Its
// key places a cursor that carries no Seq (one built from a printed key).
type OperationCursor struct {
	CreatedAt              int64
	CallerDID, OperationID string
	// Seq is the row's models.Operation.Seq; zero to look it up by key.
	Seq int64
}

// CursorOf returns the cursor just after op.
func CursorOf(op *models.Operation) *OperationCursor {
	return &OperationCursor{CreatedAt: op.CreatedAt, CallerDID: op.CallerDID, OperationID: op.OperationID, Seq: op.Seq}
}

// ListOperationsParams pages through one owner's operations, oldest first.
type ListOperationsParams struct {
	// OwnerDID is the owner whose operations are listed.
	OwnerDID string
	// After resumes after this position; nil starts at the oldest.
	After *OperationCursor
	// Limit is the page size; it must be positive.
	Limit int
}

// ListOperationsByOwner returns up to Limit operations of an owner in
// (created_at, seq) order: by record time, then record order (before
// migration 0019, ties were in key order; rows recorded before it keep that
// order). A page is one range of the owner index (owner, created_at, seq).
// A short page is the last one.
func (r *Repository) ListOperationsByOwner(ctx context.Context, p ListOperationsParams) (_ []models.Operation, err error) {
	ctx, end := r.start(ctx, "ListOperationsByOwner")
	defer end(&err)
	if err := errors.Join(requireKeys("owner", p.OwnerDID), requireLimit(p.Limit), requireText("list", p)); err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	var after []any
	if p.After != nil {
		if p.After.Seq == 0 {
			if err := (OperationKey{CallerDID: p.After.CallerDID, OperationID: p.After.OperationID}).validate(); err != nil {
				return nil, fmt.Errorf("list operations: cursor: %w", err)
			}
		}
		seq, err := r.cursorSeq(ctx, p.After.Seq, OperationKey{CallerDID: p.After.CallerDID, OperationID: p.After.OperationID})
		if err != nil {
			return nil, fmt.Errorf("list operations: %w", err)
		}
		after = []any{p.After.CreatedAt, seq}
	}
	var rows []models.Operation
	err = findOps(r.conn(ctx).Scopes(scopes.Owner(p.OwnerDID),
		scopes.After([]string{"created_at", "seq"}, after)).Limit(p.Limit), &rows)
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", p.OwnerDID, err)
	}
	return rows, nil
}

func validateOperationInput(in OperationInput) error {
	err := requireKeys("caller", in.CallerDID, "operation id", in.OperationID, "node key", in.NodeKey,
		"owner", in.OwnerDID, "connector", in.ConnectorName, "model", in.Model, "op", in.Op,
		"account key", in.AccountKey, "target", in.Target,
		"deterministic event id", in.DeterministicEventID, "payload hash", in.PayloadHash)
	if err == nil {
		err = requireText("operation", in)
	}
	if err != nil {
		return err
	}
	if in.DocumentID != nil {
		if err := requireKeys("document id (leave it nil when there is none)", *in.DocumentID); err != nil {
			return err
		}
	}
	if in.NotBefore != nil {
		if err := requireTime("not-before time (leave it nil for at once)", *in.NotBefore); err != nil {
			return err
		}
	}
	if in.Weight < 0 || in.Weight > MaxWeight {
		return invalid("weight %d is outside 0..%d", in.Weight, MaxWeight)
	}
	// The literal null is no intent either: it would read back as NULL.
	intent, err := models.ParseJSON(in.ReissueIntent)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if intent.IsNull() {
		return invalid("reissue intent is empty")
	}
	return nil
}

// ptrString prints an optional value, "none" for nil.
func ptrString(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// equalPtr reports whether a and b are both nil or point to equal values.
func equalPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
