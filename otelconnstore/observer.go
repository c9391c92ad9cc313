package otelconnstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/connstore/connstore/repository"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope name of the tracer and meter.
const scope = "github.com/connstore/connstore"

// counters are the event counters and what they count.
var counters = map[repository.EventKind]string{
	repository.EventCASRetry:          "compare-and-swap attempts lost and retried",
	repository.EventCASExhausted:      "compare-and-swap loops that lost every attempt",
	repository.EventLeaseLost:         "fenced writes refused because the lease was lost",
	repository.EventReplay:            "fenced writes retried after they had landed",
	repository.EventClaimed:           "operations leased by claims",
	repository.EventCheckpointRefused: "sweep checkpoint commits refused",
	repository.EventCollected:         "finished operations deleted by retention",
	repository.EventReceiptRetry:      "relist receipts re-run after a sequence clash",
	repository.EventReceiptFallback:   "relist receipts whose plain inserts fell back to ON CONFLICT",
	repository.EventThrottled:         "claims that found work only behind accounts' flow limits",
	repository.EventAccountPaused:     "provider accounts paused (reason: the connector)",
	repository.EventAccountResumed:    "provider accounts resumed early (reason: the connector)",
}

// Observer is a repository.Observer on OpenTelemetry.
type Observer struct {
	tracer   trace.Tracer
	counters map[repository.EventKind]metric.Int64Counter
}

// New returns an Observer whose spans and counters come from tp and mp.
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Observer, error) {
	meter := mp.Meter(scope)
	o := &Observer{tracer: tp.Tracer(scope), counters: map[repository.EventKind]metric.Int64Counter{}}
	for kind, desc := range counters {
		c, err := meter.Int64Counter("connstore."+string(kind), metric.WithDescription(desc))
		if err != nil {
			return nil, fmt.Errorf("otelconnstore: counter %s: %w", kind, err)
		}
		o.counters[kind] = c
	}
	return o, nil
}

// Begin implements repository.Observer: a span named connstore.<Method>.
// A call that failed is an error span, except ErrNotFound (see below).
func (o *Observer) Begin(ctx context.Context, method string) (context.Context, func(error)) {
	ctx, span := o.tracer.Start(ctx, "connstore."+method, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("connstore.method", method)))
	return ctx, func(err error) {
		switch {
		case errors.Is(err, repository.ErrNotFound):
			// An answer, not a failure: a lookup of a row that is not
			// there is how callers ask whether it is.
			span.SetAttributes(attribute.Bool("connstore.not_found", true))
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Observe implements repository.Observer: the event's counter grows by its
// count, with the method and reason as attributes, and the call's span gets
// the event.
func (o *Observer) Observe(ctx context.Context, e repository.Event) {
	attrs := []attribute.KeyValue{attribute.String("connstore.method", e.Method)}
	if e.Reason != "" {
		attrs = append(attrs, attribute.String("connstore.reason", e.Reason))
	}
	if c, ok := o.counters[e.Kind]; ok {
		c.Add(ctx, max(e.Count, 1), metric.WithAttributes(attrs...))
	}
	trace.SpanFromContext(ctx).AddEvent("connstore."+string(e.Kind),
		trace.WithAttributes(append(attrs, attribute.Int64("connstore.count", e.Count))...))
}
