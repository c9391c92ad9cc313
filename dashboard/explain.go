package dashboard

import (
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
)

// explain says in words why op is where it is: its state, its lease, when
// it is due, its attempts and the last answer it got.
func explain(op *models.Operation, now time.Time) []string {
	var why []string
	at := func(ms int64) string { return inWords(time.UnixMilli(ms), now) + " (" + msTime(ms) + ")" }
	switch op.State {
	case models.OperationAttempted:
		live := op.LeaseToken != nil && op.LeaseExpiresAt != nil && *op.LeaseExpiresAt >= now.UnixMilli()
		switch {
		case live:
			why = append(why, fmt.Sprintf("Leased by a worker until %s: a handler is running it now.", at(*op.LeaseExpiresAt)))
		case op.LeaseToken != nil:
			why = append(why, fmt.Sprintf("Its lease expired %s: its worker stopped without finishing; the next claim takes it.",
				at(deref64(op.LeaseExpiresAt))))
		case dueAt(op.NextAttemptAt, op.CreatedAt) > now.UnixMilli():
			why = append(why, fmt.Sprintf("Waiting: due %s (a retry's backoff or a scheduled time).", at(dueAt(op.NextAttemptAt, op.CreatedAt))))
		default:
			why = append(why, fmt.Sprintf("Due %s: the next claim takes it, unless its account's limits hold it (see Accounts).", at(dueAt(op.NextAttemptAt, op.CreatedAt))))
		}
	case models.OperationCommitted:
		why = append(why, fmt.Sprintf("Committed %s: the provider accepted it.", at(op.UpdatedAt)))
	case models.OperationDead:
		why = append(why, fmt.Sprintf("Dead since %s: no more attempts are made; requeue it to try again.", at(op.UpdatedAt)))
	case models.OperationReconcileOnly:
		why = append(why, fmt.Sprintf("Reconcile-only since %s: left for a sweep to reconcile with the provider.", at(op.UpdatedAt)))
	}
	if op.Attempts > 0 {
		why = append(why, fmt.Sprintf("Attempted %d time(s).", op.Attempts))
	}
	if op.LastKind != nil || op.LastHTTPStatus != nil {
		answer := deref(op.LastKind)
		if op.LastHTTPStatus != nil {
			answer = fmt.Sprintf("%s HTTP %d", answer, *op.LastHTTPStatus)
		}
		if op.LastMessage != nil {
			answer += ": " + *op.LastMessage
		}
		why = append(why, "Last answer: "+answer+".")
	}
	if op.Flow {
		why = append(why, fmt.Sprintf("Under flow control: account %s of %s.", op.AccountKey, op.ConnectorName))
	}
	return why
}

func deref64(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

func itoa(v int64) string { return fmt.Sprint(v) }
