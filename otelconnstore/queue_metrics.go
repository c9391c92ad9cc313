package otelconnstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/connstore/connstore/repository"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// QueueMetrics registers gauges read from repo.CountOperations at each
// collection: connstore.operations (by state), connstore.queue.due (due
// and unclaimed), connstore.queue.leased (in flight), connstore.queue.overdue
// and connstore.queue.oldest_due (seconds the oldest due operation has
// waited), per connector (and owner with ByOwner). One query per
// collection, whatever the number of gauges; a failed query is returned to
// the SDK (which logs it) and reports nothing for that collection. A series
// once reported stays reported: a drained queue reads 0, not "no data".
// A negative OverdueAfter or Timeout is ErrInvalidInput. Call Unregister on
// the result to stop.
func QueueMetrics(mp metric.MeterProvider, repo *repository.Repository, opts QueueOptions) (metric.Registration, error) {
	if repo == nil {
		return nil, fmt.Errorf("otelconnstore: %w: a repository is required", repository.ErrInvalidInput)
	}
	if opts.OverdueAfter < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("otelconnstore: %w: OverdueAfter %v and Timeout %v must not be negative",
			repository.ErrInvalidInput, opts.OverdueAfter, opts.Timeout)
	}
	meter := mp.Meter(scope)
	gauge := func(name, desc string) (metric.Int64ObservableGauge, error) {
		return meter.Int64ObservableGauge(name, metric.WithDescription(desc))
	}
	count, err := gauge("connstore.operations", "operations by state")
	if err != nil {
		return nil, err
	}
	due, err := gauge("connstore.queue.due", "attempted operations due now and not leased")
	if err != nil {
		return nil, err
	}
	leased, err := gauge("connstore.queue.leased", "attempted operations under a live lease")
	if err != nil {
		return nil, err
	}
	overdue, err := gauge("connstore.queue.overdue", "due operations unclaimed for longer than the overdue bound")
	if err != nil {
		return nil, err
	}
	oldest, err := meter.Float64ObservableGauge("connstore.queue.oldest_due",
		metric.WithDescription("how long the oldest due, unclaimed operation has waited"), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = defaultQueueTimeout
	}
	// seen are the series reported before: a queue that drained has no row
	// to count, and is reported as 0, not dropped (a dashboard would keep
	// showing its last value, or "no data").
	var mu sync.Mutex
	seen := map[[3]string]*group{}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		counts, err := repo.CountOperations(ctx, repository.OperationCountsParams{OverdueAfter: opts.OverdueAfter})
		if err != nil {
			return fmt.Errorf("otelconnstore: queue metrics: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		now := aggregate(counts, opts.ByOwner)
		for key, g := range seen {
			if _, ok := now[key]; !ok {
				now[key] = &group{OperationCount: repository.OperationCount{ConnectorName: g.ConnectorName, State: g.State},
					attrs: g.attrs}
			}
		}
		seen = now
		for _, g := range now {
			attrs := metric.WithAttributes(g.attrs...)
			o.ObserveInt64(count, g.Count, attrs)
			if g.State == "attempted" {
				o.ObserveInt64(due, g.Due, attrs)
				o.ObserveInt64(leased, g.Leased, attrs)
				o.ObserveInt64(overdue, g.Overdue, attrs)
				o.ObserveFloat64(oldest, g.OldestDue.Seconds(), attrs)
			}
		}
		return nil
	}, count, due, leased, overdue, oldest)
}

// group is one time series: counts summed over the owners it merges.
type group struct {
	repository.OperationCount
	attrs []attribute.KeyValue
}

// aggregate sums the per-owner counts per connector and state (unless
// byOwner), keeping the longest wait, keyed by connector, state and owner.
func aggregate(counts []repository.OperationCount, byOwner bool) map[[3]string]*group {
	out := map[[3]string]*group{}
	for _, c := range counts {
		key := [3]string{c.ConnectorName, c.State, ""}
		attrs := []attribute.KeyValue{attribute.String("connstore.connector", c.ConnectorName), attribute.String("connstore.state", c.State)}
		if byOwner {
			key[2] = c.OwnerDID
			attrs = append(attrs, attribute.String("connstore.owner", c.OwnerDID))
		}
		g, ok := out[key]
		if !ok {
			g = &group{OperationCount: repository.OperationCount{ConnectorName: c.ConnectorName, State: c.State}, attrs: attrs}
			out[key] = g
		}
		g.Count += c.Count
		g.Due += c.Due
		g.Leased += c.Leased
		g.Overdue += c.Overdue
		g.OldestDue = max(g.OldestDue, c.OldestDue)
	}
	return out
}
