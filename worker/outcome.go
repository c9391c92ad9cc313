package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// Failure kinds the pool records for attempts it ended itself.
const (
	// KindTimeout is an attempt whose handler passed its timeout.
	KindTimeout = "timeout"
	// KindPanic is an attempt whose handler panicked.
	KindPanic = "panic"
	// KindInvalidResult is an attempt whose handler returned a result the
	// store refuses (other than a commit; see Pool).
	KindInvalidResult = "invalid_result"
)

// Why a handler's context was cancelled.
var (
	errShutdown  = errors.New("connstore worker: shutting down")
	errLeaseLost = errors.New("connstore worker: lease lost")
	errTimeout   = errors.New("connstore worker: handler timeout")
)

// action is what the pool writes for one handler's return.
type action int

const (
	actCommit action = iota + 1
	actFailure
	actSnooze
	actDead
	actReconcileOnly
	actRelease
	actDrop // the lease was lost: nothing to write
)

// outcome is one handler's return, decided: the write and its parameters,
// and the cause counted beside it.
type outcome struct {
	job     *job
	act     action
	commit  repository.CommitParams
	failure repository.FailureParams
	snooze  repository.SnoozeParams
	finish  repository.FinishParams
	// refusal is why the handler's own result was not recorded as given.
	refusal            error
	panicked, timedOut bool
}

// decide turns what a handler returned into what is recorded. The rule for
// a result the store would refuse: a commit becomes dead (its write may
// have landed at the provider, so re-driving it could write twice: a user
// decides), anything else a failed attempt of kind invalid_result (the
// backoff re-drives it and in time declares it dead). Either way the rest
// of its batch is recorded as returned.
func decide(j *job, res Result, cause error, panicked bool, now time.Time) outcome {
	o := outcome{job: j, panicked: panicked, finish: repository.FinishParams{Fence: j.fence}}
	fail := func(kind string, status *int64, notBefore *time.Time, msg string) {
		o.act = actFailure
		o.failure = repository.FailureParams{Fence: j.fence, Kind: kind, HTTPStatus: status, NotBefore: notBefore, Message: msg}
	}
	switch {
	case errors.Is(cause, repository.ErrInvalidInput): // a bad per-operation setting; the handler did not run
		o.refusal = cause
		fail(KindInvalidResult, nil, nil, cause.Error())
		return o
	case errors.Is(cause, errLeaseLost):
		o.act = actDrop
		return o
	case res.kind == kindCommit:
		o.act, o.commit = actCommit, repository.CommitParams{Fence: j.fence, DocumentID: res.documentID,
			ProviderEtag: res.providerEtag, ResultEntity: res.resultEntity}
		o.refusal = o.commit.Validate()
		if o.refusal == nil && res.documentID != nil && j.op.DocumentID != nil && *res.documentID != *j.op.DocumentID {
			o.refusal = fmt.Errorf("commit %s: %w: operation is linked to document %s; the commit names %s",
				j.fence, repository.ErrInvalidInput, *j.op.DocumentID, *res.documentID)
		}
		if o.refusal != nil {
			o.act = actDead
			o.finish = repository.FinishParams{Fence: j.fence, Kind: KindInvalidResult, Message: o.refusal.Error()}
		}
		return o
	case panicked:
		fail(KindPanic, nil, nil, res.message)
		return o
	case errors.Is(cause, errTimeout):
		o.timedOut = true
		fail(KindTimeout, nil, nil, cause.Error())
		return o
	case errors.Is(cause, errShutdown):
		o.act = actRelease
		return o
	}
	switch res.kind {
	case kindRetry:
		fail(res.failureKind, res.httpStatus, res.notBefore, res.message)
		o.refusal = o.failure.Validate()
	case kindSnooze:
		o.act, o.snooze = actSnooze, repository.SnoozeParams{Fence: j.fence, Until: now.Add(res.snooze)}
		if res.snooze <= 0 {
			o.refusal = fmt.Errorf("snooze %s: %w: duration %v must be positive", j.fence, repository.ErrInvalidInput, res.snooze)
		} else {
			o.refusal = o.snooze.Validate()
		}
	case kindPause:
		o.act, o.snooze = actSnooze, repository.SnoozeParams{Fence: j.fence, Until: *res.notBefore, PauseAccount: true,
			Kind: res.failureKind, HTTPStatus: res.httpStatus, Message: res.message}
		if !res.notBefore.After(now) {
			o.refusal = fmt.Errorf("pause account of %s: %w: until %v is not after now", j.fence, repository.ErrInvalidInput, *res.notBefore)
		} else {
			o.refusal = o.snooze.Validate()
		}
	case kindDead:
		o.act = actDead
		o.finish = repository.FinishParams{Fence: j.fence, Kind: res.failureKind, HTTPStatus: res.httpStatus, Message: res.message}
		o.refusal = o.finish.Validate()
	case kindReconcileOnly:
		o.act = actReconcileOnly
	default:
		o.refusal = fmt.Errorf("operation %s: %w: the handler returned the zero Result", j.fence, repository.ErrInvalidInput)
	}
	if o.refusal != nil {
		fail(KindInvalidResult, nil, nil, o.refusal.Error())
	}
	return o
}

// timeoutFor is op's handler bound: HandlerTimeoutFor's, else
// HandlerTimeout; 0 is none.
func (cfg *Config) timeoutFor(op *models.Operation) (time.Duration, error) {
	if cfg.HandlerTimeoutFor != nil {
		d := cfg.HandlerTimeoutFor(op)
		if d < 0 {
			return 0, fmt.Errorf("%w: handler timeout %v for %s/%s is negative", repository.ErrInvalidInput, d,
				op.CallerDID, op.OperationID)
		}
		if d > 0 {
			return d, nil
		}
	}
	return cfg.HandlerTimeout, nil
}
