package fence

import "github.com/connstore/connstore/models"

// Why a lease holder's write found its lease lost (the repository's
// LeaseLost* constants are these).
const (
	Expired         = "lease expired"
	HeldByOther     = "lease held by another token"
	NotHeld         = "operation is not leased"
	Ended           = "this lease already ended with another write"
	Finished        = "operation already finished"
	AttemptsChanged = "attempts changed since they were read"
)

// Verdict says why a write did not change the stored row: exactly one of
// Replay (this very write had already landed), Reason (the lease is lost,
// one of the constants above) or Conflict (the write's own guard refused
// the caller's value, described for an ErrInvalidInput).
type Verdict struct {
	Replay   bool
	Reason   string
	Conflict string
}

// Explain says why w did not change op, the row as stored after the
// write's statement: first a replay of w (a row this token ended showing
// w's result), then, in order, a finished operation, a lease this token
// ended, no lease, another holder's lease, the write's own guard, and
// otherwise an expired lease.
func Explain(w Write, op *models.Operation) Verdict {
	endedHere := op.EndedLeaseToken != nil && *op.EndedLeaseToken == w.Target.LeaseToken
	if endedHere && w.Replayed != nil && w.Replayed(op) {
		return Verdict{Replay: true}
	}
	switch {
	case op.State != models.OperationAttempted:
		return Verdict{Reason: Finished}
	case op.LeaseToken == nil && endedHere:
		return Verdict{Reason: Ended}
	case op.LeaseToken == nil:
		return Verdict{Reason: NotHeld}
	case *op.LeaseToken != w.Target.LeaseToken:
		return Verdict{Reason: HeldByOther}
	}
	if w.Mismatch != nil {
		if v := w.Mismatch(op); v != (Verdict{}) {
			return v
		}
	}
	return Verdict{Reason: Expired}
}
