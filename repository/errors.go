package repository

import (
	"errors"
	"fmt"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/fence"
	"gorm.io/gorm"
)

// ErrInvalidInput is returned, before anything is written, for an argument
// that cannot be right: an empty key, a bad time or limit, an unknown state.
var ErrInvalidInput = errors.New("connstore: invalid input")

// ErrNotFound is returned when the addressed row does not exist. It matches
// gorm.ErrRecordNotFound with errors.Is.
var ErrNotFound = fmt.Errorf("connstore: not found: %w", gorm.ErrRecordNotFound)

// ErrConflict is the optimistic-lock conflict of package hooks.
var ErrConflict = hooks.ErrConflict

// ErrRetriesExhausted is returned when a compare-and-swap loop lost every
// attempt to concurrent writers. RetriesExhaustedError carries the detail.
var ErrRetriesExhausted = errors.New("connstore: compare-and-swap retries exhausted")

// ErrOutOfScope is returned when a repository made WithScopes is asked to
// create or upsert a row its scopes exclude; nothing was written.
var ErrOutOfScope = errors.New("connstore: key outside the repository's scopes")

// ErrUnsafeSQLite is returned by New for a SQLite handle whose concurrent
// writers would fail with "database is locked" instead of waiting.
var ErrUnsafeSQLite = errors.New("connstore: SQLite handle not set up for concurrent writers")

// ErrPluginMissing is returned by New when the hooks plugin is not registered.
var ErrPluginMissing = errors.New("connstore: optimistic-lock plugin not registered (db.Use(hooks.New(...)))")

// RetriesExhaustedError names the row and the number of attempts made.
type RetriesExhaustedError struct {
	// ConnectorName and OwnerDID identify the sync-state row.
	ConnectorName, OwnerDID string
	// Attempts is the number of read-recompute-write attempts made.
	Attempts int
	// Action is the call that gave up; empty means "update sync progress".
	Action string
}

// Error implements error.
func (e *RetriesExhaustedError) Error() string {
	action := e.Action
	if action == "" {
		action = "update sync progress"
	}
	return fmt.Sprintf("%s %s/%s: CAS failed after %d attempts", action, e.ConnectorName, e.OwnerDID, e.Attempts)
}

// Unwrap makes errors.Is(err, ErrRetriesExhausted) hold.
func (e *RetriesExhaustedError) Unwrap() error { return ErrRetriesExhausted }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// notFound translates gorm's not-found into ours and passes others through.
func notFound(err error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	return err
}

// ErrPayloadConflict is returned when an operation id is recorded again with
// a different payload hash; the stored operation is left unchanged.
var ErrPayloadConflict = errors.New("connstore: operation recorded with a different payload")

// ErrLeaseLost is returned by a fenced write whose lease token no longer
// holds the operation (released, expired, or claimed by another worker), or
// whose operation already left the attempted state. Nothing was written.
// LeaseLostError carries the reason.
var ErrLeaseLost = errors.New("connstore: lease lost")

// Reasons a fenced write was refused.
const (
	LeaseLostExpired         = fence.Expired
	LeaseLostHeldByOther     = fence.HeldByOther
	LeaseLostNotHeld         = fence.NotHeld
	LeaseLostEnded           = fence.Ended
	LeaseLostFinished        = fence.Finished
	LeaseLostAttemptsChanged = fence.AttemptsChanged
)

// leaseLostAdvice says what a holder can do about each refusal.
var leaseLostAdvice = map[string]string{
	LeaseLostExpired:         "heartbeat more often than the lease lasts; claim it again to retry",
	LeaseLostHeldByOther:     "another worker re-claimed it after the lease expired; drop this attempt",
	LeaseLostNotHeld:         "claim it before writing",
	LeaseLostEnded:           "a lease ends once; claim the operation again",
	LeaseLostFinished:        "drop this attempt",
	LeaseLostAttemptsChanged: "another failure report of this attempt won; drop this one",
}

// LeaseLostError says why a fenced write changed nothing. It matches
// ErrLeaseLost with errors.Is.
type LeaseLostError struct {
	// Action is the refused write ("commit", "record failure", ...).
	Action string
	// Fence is the fence the write carried.
	Fence Fence
	// Reason is one of the LeaseLost* constants.
	Reason string
	// State is the operation's stored state when the refusal was explained.
	State string
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	reason := e.Reason
	if e.Reason == LeaseLostFinished {
		reason += " as " + e.State
	}
	return fmt.Sprintf("%s %s: lease lost: %s; %s", e.Action, e.Fence, reason, leaseLostAdvice[e.Reason])
}

// Unwrap makes errors.Is(err, ErrLeaseLost) hold.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// ErrCheckpointRefused is returned when a sweep checkpoint cannot be
// committed yet (or ever). CheckpointRefusedError names the reason.
var ErrCheckpointRefused = errors.New("connstore: sweep checkpoint refused")

// Reasons a sweep checkpoint commit is refused.
const (
	RefusedReceiptMissing    = "receipt not recorded"
	RefusedIncomplete        = "receipt is not a complete relist"
	RefusedAlreadyCommitted  = "receipt already committed"
	RefusedUnresolved        = "receipt has unresolved candidates"
	RefusedEarlierUnresolved = "an earlier receipt of the partition has unresolved candidates"
)

// refusalAdvice says what a caller can do about each refusal.
var refusalAdvice = map[string]string{
	RefusedReceiptMissing:    "record it with RecordRelistReceipt first",
	RefusedIncomplete:        "only a complete relist can move the checkpoint",
	RefusedAlreadyCommitted:  "nothing to do: the checkpoint already accounts for it",
	RefusedUnresolved:        "apply or refuse each of its candidates, then commit again",
	RefusedEarlierUnresolved: "resolve the earlier receipt's candidates and commit it first",
}

// CheckpointRefusedError says why CommitSweepCheckpoint changed nothing.
type CheckpointRefusedError struct {
	// Receipt is the receipt whose commit was refused.
	Receipt ReceiptKey
	// Reason is one of the Refused* constants.
	Reason string
}

// Error implements error.
func (e *CheckpointRefusedError) Error() string {
	return fmt.Sprintf("commit sweep checkpoint %s: refused: %s; %s", e.Receipt, e.Reason, refusalAdvice[e.Reason])
}

// Unwrap makes errors.Is(err, ErrCheckpointRefused) hold.
func (e *CheckpointRefusedError) Unwrap() error { return ErrCheckpointRefused }

// isDuplicateKey reports a unique-constraint violation, translated by the
// dialect into gorm.ErrDuplicatedKey. Translators match the driver's own
// error type, so each layer of wrapping is offered to them.
func (r *Repository) isDuplicateKey(err error) bool {
	t, ok := r.db.Dialector.(gorm.ErrorTranslator)
	for ; err != nil; err = errors.Unwrap(err) {
		if errors.Is(err, gorm.ErrDuplicatedKey) || (ok && errors.Is(t.Translate(err), gorm.ErrDuplicatedKey)) {
			return true
		}
	}
	return false
}

// ErrWrongState is returned when an operator's write addresses a row whose
// state does not allow it (requeueing an operation that is not dead or
// reconcile-only, cancelling one that already finished, a status change
// whose expected status no longer holds). Nothing was written. StateError
// names the state found.
var ErrWrongState = errors.New("connstore: row is not in a state that allows this")

// StateError says which state refused an operator's write. It matches
// ErrWrongState with errors.Is.
type StateError struct {
	// Action is the refused write ("requeue", "cancel", "set sync status").
	Action string
	// Key names the row.
	Key string
	// State is the stored state (or status) the write met.
	State string
	// Want lists the states the write accepts.
	Want []string
}

// Error implements error.
func (e *StateError) Error() string {
	return fmt.Sprintf("%s %s: %s is %q, not one of %q", e.Action, e.Key, "state", e.State, e.Want)
}

// Unwrap makes errors.Is(err, ErrWrongState) hold.
func (e *StateError) Unwrap() error { return ErrWrongState }

// ErrLeaseHeld is returned by CancelOperation, without Force, for an
// operation a worker holds under a live lease. Nothing was written.
var ErrLeaseHeld = errors.New("connstore: operation is held by a live lease")
