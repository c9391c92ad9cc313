package worker

import (
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// The outcomes Finished reports.
const (
	OutcomeCommitted     = models.OperationCommitted
	OutcomeRetried       = "retried"
	OutcomeDead          = models.OperationDead
	OutcomeReconcileOnly = models.OperationReconcileOnly
	OutcomeSnoozed       = "snoozed"
	OutcomeReleased      = "released"
	// OutcomeLeaseLost is an operation whose lease was lost while held:
	// nothing of its attempt was recorded.
	OutcomeLeaseLost = "lease_lost"
	// OutcomeRefused is a write the store refused and the pool could not
	// record otherwise; its lease expires.
	OutcomeRefused = "refused"
)

// Finished describes one operation the pool is done with: its result was
// recorded (or found impossible to record), and the pool no longer holds
// it. Config.OnFinished receives one per claimed operation; package
// otelconnstore turns them into histograms.
type Finished struct {
	// Fence is the operation's key and the lease it was held under.
	Fence repository.Fence
	// ConnectorName and OwnerDID are the operation's.
	ConnectorName, OwnerDID string
	// Outcome is one of the Outcome* values.
	Outcome string
	// Pickup is the time from the operation's record to its claim, by the
	// repository's clock (Repository.Now), set only on its first claim: no
	// attempt counted, no failure recorded and no earlier lease ended
	// (released, snoozed). A later claim's due time is not kept by the
	// store. A claim after an earlier holder died without writing anything
	// still looks like a first claim.
	Pickup time.Duration
	// FirstClaim is true when Pickup is set.
	FirstClaim bool
	// Handler is how long the handler ran; zero when it never started (a
	// lease released at shutdown).
	Handler time.Duration
	// ClaimToFinish is the time from the claim to the result's recording.
	ClaimToFinish time.Duration
}

// finished reports j, settled as outcome at now, to Config.OnFinished.
func (r *run) finished(j *job, outcome string, now time.Time) {
	if r.cfg.OnFinished == nil {
		return
	}
	f := Finished{Fence: j.fence, ConnectorName: j.op.ConnectorName, OwnerDID: j.op.OwnerDID, Outcome: outcome,
		Handler: j.ran, ClaimToFinish: now.Sub(j.claimedAt)}
	if j.op.Attempts == 0 && j.op.LastKind == nil && j.op.EndedLeaseToken == nil {
		f.FirstClaim = true
		f.Pickup = max(0, j.storeNow.Sub(time.UnixMilli(j.op.CreatedAt)))
	}
	r.cfg.OnFinished(f)
}
