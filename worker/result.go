package worker

import (
	"context"

	"github.com/connstore/connstore/models"
)

// Handler performs one operation's outbound write and says how it ended.
// Its context is cancelled when the pool shuts down past its grace period
// or the operation's lease is lost; a handler that returns because of that
// has its operation released, not failed.
type Handler func(ctx context.Context, op *models.Operation) Result

type resultKind int

const (
	kindCommit resultKind = iota + 1
	kindRetry
	kindDead
	kindReconcileOnly
)

// Result is how a handler's attempt ended; build it with Commit, Retry,
// Dead or ReconcileOnly.
type Result struct {
	kind                     resultKind
	documentID, providerEtag *string
	resultEntity             models.JSON
	failureKind              string
	httpStatus               *int64
}

// Commit reports that the write landed, with what it produced.
func Commit(documentID, providerEtag *string, resultEntity models.JSON) Result {
	return Result{kind: kindCommit, documentID: documentID, providerEtag: providerEtag, resultEntity: resultEntity}
}

// Retry reports a failed attempt to re-drive later (the backoff decides
// when, or that the operation is dead); httpStatus may be nil.
func Retry(kind string, httpStatus *int64) Result {
	return Result{kind: kindRetry, failureKind: kind, httpStatus: httpStatus}
}

// Dead reports an operation that needs a user's action.
func Dead() Result { return Result{kind: kindDead} }

// ReconcileOnly reports an operation only reconciliation may touch now.
func ReconcileOnly() Result { return Result{kind: kindReconcileOnly} }
