package fence

import (
	"bytes"
	"fmt"

	"github.com/connstore/connstore/models"
)

// The actions of the writes, as refusals and events name them.
const (
	ActionCommit    = "commit"
	ActionFailure   = "record failure"
	ActionHeartbeat = "heartbeat"
	ActionRelease   = "release"
	ActionSnooze    = "snooze"
	ActionDead      = "mark dead"
	ActionReconcile = "mark reconcile-only"
)

// Commit records a write that landed: committed with the provider's etag
// and result (result as stored, already normalised), the lease ended and
// nothing more due. A document id, when given, is stored and guarded: the
// stored row must have none or the same one (a different one is the
// caller's mistake, a Conflict). Its replay is a committed row with this
// very result.
func Commit(t Target, documentID, etag *string, result models.JSON) Write {
	w := Write{Action: ActionCommit, Target: t, Ends: true, Set: map[string]any{
		"state": models.OperationCommitted, "provider_etag": etag,
		"result_entity": result, "next_attempt_at": nil,
	}, Replayed: func(op *models.Operation) bool {
		return op.State == models.OperationCommitted && (documentID == nil || equal(op.DocumentID, documentID)) &&
			equal(op.ProviderEtag, etag) && bytes.Equal(op.ResultEntity, result)
	}}
	if documentID != nil {
		doc := *documentID
		w.Set["document_id"] = doc
		w.Guards = []Guard{{Col: "document_id", Value: doc, OrNull: true}}
		w.Mismatch = func(op *models.Operation) Verdict {
			if op.DocumentID == nil || *op.DocumentID == doc {
				return Verdict{}
			}
			return Verdict{Conflict: fmt.Sprintf("operation is linked to document %s; the commit names %s", *op.DocumentID, doc)}
		}
	}
	return w
}

// finishActions name the write that ends an operation in each state.
var finishActions = map[string]string{
	models.OperationDead:          ActionDead,
	models.OperationReconcileOnly: ActionReconcile,
}

// Finish ends the operation in state (dead or reconcile_only) with the
// attempt's own answer (its cause, if the handler gave one; never the one
// of a failure before it), keeping its document id so retention still sees
// which document shows the failure. Its replay is a row this token ended in
// that state.
func Finish(t Target, state string, a Answer) Write {
	w := Write{Action: finishActions[state], Target: t, Ends: true,
		Set:      map[string]any{"state": state, "next_attempt_at": nil},
		Replayed: func(op *models.Operation) bool { return op.State == state }}
	a.Set(w.Set)
	return w
}

// Failure counts a failed attempt on a row read with readAttempts: its
// answer is stored (a.Kind is required), and the operation is due again at next
// (Unix milliseconds), or dead when next is nil (the backoff gave up). It
// is guarded on the attempts read, so two reports of one attempt cannot
// both count: the second is refused as AttemptsChanged. Its replay is a
// row this token ended with the same kind and status.
func Failure(t Target, readAttempts int64, a Answer, next *int64) Write {
	kind, status := a.Kind, a.HTTPStatus
	set := map[string]any{"attempts": readAttempts + 1}
	a.Set(set)
	if next == nil {
		set["state"], set["next_attempt_at"] = models.OperationDead, nil
	} else {
		set["state"], set["next_attempt_at"] = models.OperationAttempted, *next
	}
	return Write{Action: ActionFailure, Target: t, Ends: true, Set: set,
		Guards: []Guard{{Col: "attempts", Value: readAttempts}},
		Mismatch: func(op *models.Operation) Verdict {
			if op.Attempts == readAttempts {
				return Verdict{}
			}
			return Verdict{Reason: AttemptsChanged}
		},
		Replayed: func(op *models.Operation) bool {
			return (op.State == models.OperationAttempted || op.State == models.OperationDead) &&
				equal(op.LastKind, &kind) && equal(op.LastHTTPStatus, status)
		}}
}

// Heartbeat extends a held lease to leaseUntil (a value or the database
// clock's expression) and the row's due time to dueAt with it: a held row
// is not due, and a crashed holder's row comes due when its lease runs
// out. It does not end the lease, so it has no replay: extending a held
// lease again is harmless.
func Heartbeat(t Target, leaseUntil any, dueAt int64) Write {
	return Write{Action: ActionHeartbeat, Target: t,
		Set: map[string]any{"lease_expires_at": leaseUntil, "next_attempt_at": dueAt}}
}

// Release gives a held lease back: the operation stays attempted and is
// due again at nowMillis (its due time was the lease's expiry). Its replay
// is an attempted row this token ended.
func Release(t Target, nowMillis int64) Write {
	return Write{Action: ActionRelease, Target: t, Ends: true, Set: map[string]any{"next_attempt_at": nowMillis},
		Replayed: func(op *models.Operation) bool { return op.State == models.OperationAttempted }}
}

// Snooze is a release that also sets the next attempt time, leaving the
// attempts alone, and the last answer too unless a is given (a pause on
// the provider's throttling records the provider's answer). Its replay is
// an attempted row this token ended, due at until.
func Snooze(t Target, until int64, a *Answer) Write {
	w := Write{Action: ActionSnooze, Target: t, Ends: true,
		Set: map[string]any{"next_attempt_at": until},
		Replayed: func(op *models.Operation) bool {
			return op.State == models.OperationAttempted && op.NextAttemptAt != nil && *op.NextAttemptAt == until
		}}
	if a != nil {
		a.Set(w.Set)
	}
	return w
}

func equal[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
