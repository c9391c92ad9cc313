package otelconnstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/otelconnstore"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// newStore is a migrated SQLite store whose repository has opts (and the
// store's manual clock).
func newStore(t *testing.T, opts repository.Options) *connstoretest.Store {
	t.Helper()
	return connstoretest.SQLite(t, connstoretest.Options{Repository: opts})
}

func record(t *testing.T, repo *repository.Repository, connector, owner, id string) {
	t.Helper()
	_, _, err := repo.RecordOperation(t.Context(), repository.OperationInput{
		CallerDID: "caller", OperationID: id, NodeKey: "n-" + id, OwnerDID: owner, ConnectorName: connector,
		Model: "contact", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: "e-" + id,
		PayloadHash: "h-" + id, ReissueIntent: models.JSON(`{}`)})
	require.NoError(t, err)
}

// points collects every data point by metric name and attribute set.
func points(t *testing.T, reader sdkmetric.Reader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]map[string]float64{}
	add := func(name, attrs string, v float64) {
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][attrs] += v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, encode(p.Attributes), float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, encode(p.Attributes), p.Value)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, encode(p.Attributes), float64(p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, encode(p.Attributes), float64(p.Count))
				}
			}
		}
	}
	return out
}

// TestQueueMetrics: the queue gauges per connector and state, on both
// databases (the test databases of the project's own suite).
func TestQueueMetrics(t *testing.T) {
	for _, leg := range []dbtest.Leg{dbtest.PG, dbtest.Lite} {
		t.Run(leg.Name, func(t *testing.T) {
			clock := connstoretest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			repo := dbtest.Setup(t, leg, dbtest.Options{Repository: repository.Options{NowFunc: clock.Now}}).Repo
			for _, id := range []string{"a", "b", "c"} {
				record(t, repo, "crm", "alice", id)
			}
			record(t, repo, "crm", "bob", "d")
			record(t, repo, "mail", "alice", "e")
			clock.Advance(2 * time.Minute)
			ops, err := repo.ClaimOperations(t.Context(), repository.ClaimParams{Limit: 1, LeaseFor: time.Hour, ConnectorName: "crm"})
			require.NoError(t, err)
			_, err = repo.MarkOperationDead(t.Context(), repository.FenceOf(&ops[0]))
			require.NoError(t, err)

			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			reg, err := otelconnstore.QueueMetrics(mp, repo, otelconnstore.QueueOptions{})
			require.NoError(t, err)
			got := points(t, reader)
			crm, mail := "connstore.connector=crm,connstore.state=attempted", "connstore.connector=mail,connstore.state=attempted"
			require.Equal(t, map[string]float64{crm: 3, mail: 1, "connstore.connector=crm,connstore.state=dead": 1}, got["connstore.operations"])
			require.Equal(t, map[string]float64{crm: 3, mail: 1}, got["connstore.queue.due"], "owners summed per connector")
			require.Equal(t, map[string]float64{crm: 3, mail: 1}, got["connstore.queue.overdue"])
			require.Equal(t, map[string]float64{crm: 0, mail: 0}, got["connstore.queue.leased"])
			require.Equal(t, map[string]float64{crm: 120, mail: 120}, got["connstore.queue.oldest_due"])

			require.NoError(t, reg.Unregister())
			require.Empty(t, points(t, reader)["connstore.operations"], "unregistered")
			_, err = otelconnstore.QueueMetrics(mp, nil, otelconnstore.QueueOptions{})
			require.ErrorIs(t, err, repository.ErrInvalidInput)
		})
	}
}

func TestWorkerMetrics(t *testing.T) {
	repo := newStore(t, repository.Options{}).Repo
	for _, id := range []string{"a", "b", "c", "d"} {
		record(t, repo, "crm", "alice", id)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	onFinished, err := otelconnstore.WorkerMetrics(mp)
	require.NoError(t, err)
	pool, err := worker.New(repo, worker.Config{OnFinished: onFinished, PollInterval: 5 * time.Millisecond,
		Handler: func(_ context.Context, op *models.Operation) worker.Result {
			if op.OperationID == "d" {
				return worker.Dead("validation", nil)
			}
			return worker.Commit(nil, nil, nil)
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	require.Eventually(t, func() bool { s := pool.Stats(); return s.Committed == 3 && s.Dead == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	got := points(t, reader)
	committed, dead := "connstore.connector=crm,connstore.outcome=committed", "connstore.connector=crm,connstore.outcome=dead"
	require.Equal(t, map[string]float64{committed: 3, dead: 1}, got["connstore.worker.finished"])
	require.Equal(t, map[string]float64{committed: 3, dead: 1}, got["connstore.worker.handler.duration"])
	require.Equal(t, map[string]float64{committed: 3, dead: 1}, got["connstore.worker.claim_to_finish.duration"])
	require.Equal(t, map[string]float64{"connstore.connector=crm": 4}, got["connstore.worker.pickup.duration"])
}

// A lookup of a missing row is an answer, not a failed call: its span is
// not an error span. Any other failure is.
func TestNotFoundIsNotASpanError(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	obs, err := otelconnstore.New(tp, sdkmetric.NewMeterProvider())
	require.NoError(t, err)
	repo := newStore(t, repository.Options{Observer: obs}).Repo
	_, err = repo.GetOperation(t.Context(), repository.OperationKey{CallerDID: "caller", OperationID: "missing"})
	require.ErrorIs(t, err, repository.ErrNotFound)
	_, err = repo.GetOperation(t.Context(), repository.OperationKey{CallerDID: "", OperationID: "bad"})
	require.ErrorIs(t, err, repository.ErrInvalidInput)
	got := spans.GetSpans()
	require.Len(t, got, 2)
	require.Equal(t, codes.Unset, got[0].Status.Code)
	require.Empty(t, got[0].Events, "no error recorded")
	require.Equal(t, codes.Error, got[1].Status.Code)
}

// encode renders an attribute set as k=v pairs in key order.
func encode(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}
