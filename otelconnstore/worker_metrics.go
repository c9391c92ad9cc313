package otelconnstore

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/worker"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// WorkerMetrics returns a worker.Config.OnFinished that records, per
// connector and outcome: connstore.worker.finished (operations), and the
// histograms connstore.worker.handler.duration (how long handlers ran),
// connstore.worker.claim_to_finish.duration (claim to recorded result) and
// connstore.worker.pickup.duration (record to first claim), in seconds.
// Owners are not attributes: their number is unbounded.
func WorkerMetrics(mp metric.MeterProvider) (func(worker.Finished), error) {
	meter := mp.Meter(scope)
	finished, err := meter.Int64Counter("connstore.worker.finished",
		metric.WithDescription("operations the worker pool finished with, by outcome"))
	if err != nil {
		return nil, fmt.Errorf("otelconnstore: %w", err)
	}
	hist := func(name, desc string) (metric.Float64Histogram, error) {
		h, err := meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		if err != nil {
			return nil, fmt.Errorf("otelconnstore: %s: %w", name, err)
		}
		return h, nil
	}
	handler, err := hist("connstore.worker.handler.duration", "how long handlers ran")
	if err != nil {
		return nil, err
	}
	claimToFinish, err := hist("connstore.worker.claim_to_finish.duration", "time from an operation's claim to its recorded result")
	if err != nil {
		return nil, err
	}
	pickup, err := hist("connstore.worker.pickup.duration", "time from an operation's record to its first claim")
	if err != nil {
		return nil, err
	}
	return func(f worker.Finished) {
		ctx := context.Background()
		attrs := metric.WithAttributes(attribute.String("connstore.connector", f.ConnectorName),
			attribute.String("connstore.outcome", f.Outcome))
		finished.Add(ctx, 1, attrs)
		if f.Handler > 0 {
			handler.Record(ctx, f.Handler.Seconds(), attrs)
		}
		claimToFinish.Record(ctx, f.ClaimToFinish.Seconds(), attrs)
		if f.FirstClaim {
			pickup.Record(ctx, f.Pickup.Seconds(),
				metric.WithAttributes(attribute.String("connstore.connector", f.ConnectorName)))
		}
	}, nil
}

// defaultQueueTimeout bounds a queue collection when QueueOptions has none.
const defaultQueueTimeout = 5 * time.Second

// QueueOptions tunes QueueMetrics.
type QueueOptions struct {
	// Timeout bounds each collection's query; 0 means 5 seconds.
	Timeout time.Duration
	// OverdueAfter is passed to CountOperations; 0 means its default.
	OverdueAfter time.Duration
	// ByOwner adds the owner DID as an attribute. Leave it off unless the
	// owners are few: every owner is a time series of its own.
	ByOwner bool
}
