package worker

import (
	"context"
	"time"

	"github.com/connstore/connstore/models"
)

// Handler performs one operation's outbound write and says how it ended.
// Its context is cancelled when the pool shuts down past its grace period,
// when its timeout passes, or when the operation's lease is lost.
type Handler func(ctx context.Context, op *models.Operation) Result

type resultKind int

const (
	kindCommit resultKind = iota + 1
	kindRetry
	kindSnooze
	kindDead
	kindReconcileOnly
	kindPause
)

// Result is how a handler's attempt ended; build it with Commit, Retry,
// RetryAt, Snooze, Dead or ReconcileOnly. The zero Result is not an
// outcome: the pool refuses it as it refuses any invalid result (see
// Pool's doc).
type Result struct {
	kind                     resultKind
	documentID, providerEtag *string
	resultEntity             models.JSON
	failureKind              string
	httpStatus               *int64
	notBefore                *time.Time
	snooze                   time.Duration
	message                  string
}

// Commit reports that the write landed, with what it produced.
func Commit(documentID, providerEtag *string, resultEntity models.JSON) Result {
	return Result{kind: kindCommit, documentID: documentID, providerEtag: providerEtag, resultEntity: resultEntity}
}

// Retry reports a failed attempt to re-drive later (the backoff decides
// when, or that the operation is dead); httpStatus may be nil, else it is
// an HTTP status (100–599).
func Retry(kind string, httpStatus *int64) Result {
	return Result{kind: kindRetry, failureKind: kind, httpStatus: httpStatus}
}

// RetryAt is Retry with the provider's own earliest retry time (a
// Retry-After header, a rate limit's reset): the next attempt is at the
// later of it and the backoff's.
func RetryAt(kind string, httpStatus *int64, notBefore time.Time) Result {
	r := Retry(kind, httpStatus)
	r.notBefore = &notBefore
	return r
}

// Snooze puts the operation off for d (which must be positive) without
// counting an attempt: it is not a failure, so the backoff neither delays
// nor kills it.
func Snooze(d time.Duration) Result { return Result{kind: kindSnooze, snooze: d} }

// PauseAccount reports the provider's throttling of the operation's account
// (a 429 with Retry-After, a quota's reset): the whole account is paused
// until until, on every instance, and this operation is due again then. The
// attempt is not counted (the backoff never kills an operation for the
// provider's throttling); kind and httpStatus (nil, or 100–599) are
// recorded as its last answer. An adaptive account's live cap is lowered
// (repository.AccountLimits.Adaptive).
func PauseAccount(kind string, httpStatus *int64, until time.Time) Result {
	return Result{kind: kindPause, failureKind: kind, httpStatus: httpStatus, notBefore: &until}
}

// Dead reports an operation that needs a user's action, and why: kind
// classifies the cause ("validation", "http"; empty when there is none to
// give) and httpStatus is the provider's status (nil, or 100–599). The
// cause is this attempt's own: it replaces whatever an earlier attempt
// answered, so triage never shows a 503 from before a requeue for a 422
// death. An invalid one is a failed attempt of kind invalid_result, as for
// any result the store refuses.
func Dead(kind string, httpStatus *int64) Result {
	return Result{kind: kindDead, failureKind: kind, httpStatus: httpStatus}
}

// WithMessage adds a short text for an operator to an answer (Retry,
// RetryAt, PauseAccount, Dead): the provider's error, what to fix. It is
// stored cleaned (control characters and runs of white space made one
// space) and cut to 500 bytes, as the operation's last message and in its
// attempt history. A Commit and a Snooze record no answer, and a
// ReconcileOnly records its end without a kind or message: their message
// is dropped.
func (r Result) WithMessage(msg string) Result {
	r.message = msg
	return r
}

// ReconcileOnly reports an operation only reconciliation may touch now.
func ReconcileOnly() Result { return Result{kind: kindReconcileOnly} }
