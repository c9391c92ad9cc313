package repository

import (
	"context"
	"log/slog"
)

// EventKind names something a repository call did that a user may chart.
type EventKind string

// The events a repository reports.
const (
	// EventCASRetry is a compare-and-swap lost to a concurrent writer and
	// retried (UpdateSyncProgress).
	EventCASRetry EventKind = "cas_retry"
	// EventCASExhausted is a compare-and-swap loop that lost every attempt.
	EventCASExhausted EventKind = "cas_exhausted"
	// EventLeaseLost is a refused fenced write; Reason is a LeaseLost* value.
	EventLeaseLost EventKind = "lease_lost"
	// EventReplay is a fenced write retried after it had already landed.
	EventReplay EventKind = "replay"
	// EventClaimed counts operations leased by one claim.
	EventClaimed EventKind = "claimed"
	// EventCheckpointRefused is a refused sweep commit; Reason is a Refused* value.
	EventCheckpointRefused EventKind = "checkpoint_refused"
	// EventCollected counts operations one retention pass deleted.
	EventCollected EventKind = "collected"
	// EventReceiptRetry is a receipt transaction re-run after its sequence
	// was taken by a writer that does not take the partition lock.
	EventReceiptRetry EventKind = "receipt_retry"
	// EventReceiptFallback is a relist receipt whose plain inserts of a new
	// relist met the key (a writer that skips the partition lock, a
	// collation that equates ids) and fell back to the seed's
	// ON CONFLICT path: harmless, but a steady count names such a writer.
	EventReceiptFallback EventKind = "receipt_fallback"
	// EventThrottled is a claim that found work only behind accounts'
	// limits (a cap, a rate, a pause): gated, not idle.
	EventThrottled EventKind = "throttled"
	// EventAccountPaused is an account paused (Reason: its connector, so
	// metrics keep a bounded cardinality); the structured log names the
	// account with the pause's end.
	EventAccountPaused EventKind = "account_paused"
	// EventAccountResumed is an account's pause ended early (Reason: its
	// connector).
	EventAccountResumed EventKind = "account_resumed"
)

// Event is one observation of a repository call.
type Event struct {
	Kind EventKind
	// Method is the repository method that reported it.
	Method string
	// Count is how many (claimed, collected); 1 otherwise.
	Count int64
	// Reason details a refusal.
	Reason string
}

// Observer sees every repository call and its events: the seam for metrics
// and tracing (package otelconnstore adapts it to OpenTelemetry). It must be
// safe for concurrent use and cheap.
type Observer interface {
	// Begin starts one call. The context it returns is the one the call's
	// statements run under (so a span started here parents them); end is
	// called once with the call's error.
	Begin(ctx context.Context, method string) (_ context.Context, end func(error))
	// Observe reports an event of the call running under ctx.
	Observe(ctx context.Context, e Event)
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) Begin(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}
func (nopObserver) Observe(context.Context, Event) {}

type methodKey struct{}

// start begins an observed call; defer the returned func with the call's
// named error.
func (r *Repository) start(ctx context.Context, method string) (context.Context, func(*error)) {
	ctx, end := r.obs.Begin(context.WithValue(ctx, methodKey{}, method), method)
	return ctx, func(err *error) { end(*err) }
}

// emit reports an event to the Observer and the structured log.
func (r *Repository) emit(ctx context.Context, kind EventKind, count int64, reason string) {
	method, _ := ctx.Value(methodKey{}).(string)
	e := Event{Kind: kind, Method: method, Count: count, Reason: reason}
	r.obs.Observe(ctx, e)
	level := slog.LevelDebug
	switch kind {
	case EventCASExhausted:
		level = slog.LevelWarn
	case EventLeaseLost, EventCheckpointRefused, EventCollected, EventReplay, EventReceiptFallback:
		level = slog.LevelInfo
	}
	if r.log.Enabled(ctx, level) {
		r.log.LogAttrs(ctx, level, "connstore: "+string(kind), slog.String("kind", string(kind)),
			slog.String("method", method), slog.Int64("count", count), slog.String("reason", reason))
	}
}
