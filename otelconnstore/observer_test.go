package otelconnstore_test

import (
	"context"
	"testing"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/otelconnstore"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// TestSpansAndCounters: every repository call is one span, gorm's statement
// spans nest under it, and a forced CAS loss counts one retry.
func TestSpansAndCounters(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	obs, err := otelconnstore.New(tp, mp)
	require.NoError(t, err)
	store := connstoretest.SQLite(t, connstoretest.Options{Repository: repository.Options{Observer: obs}})
	db, repo := store.DB, store.Repo
	statementSpans(t, db, tp)
	ctx := context.Background()

	require.NoError(t, repo.SetSyncState(ctx, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, repository.SyncStateInput{LastSyncedAt: "t", Status: models.SyncStatusIdle}))
	first := true
	require.NoError(t, repo.UpdateSyncProgress(ctx, repository.UpdateSyncProgressParams{
		Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
		Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			if first { // a concurrent writer wins the first round
				first = false
				require.NoError(t, db.Model(&models.SyncState{}).Where("owner_did = ?", "o").Update("entity_count", 3).Error)
			}
			return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 1}, nil
		}}))

	var call sdktrace.ReadOnlySpan
	byParent := map[string]int{}
	for _, s := range spans.GetSpans().Snapshots() {
		if s.Name() == "connstore.UpdateSyncProgress" {
			call = s
		}
		byParent[s.Parent().SpanID().String()]++
	}
	require.NotNil(t, call, "one span per repository call")
	require.GreaterOrEqual(t, byParent[call.SpanContext().SpanID().String()], 4,
		"the two reads and two guarded updates are statement spans under the call's span")
	require.Equal(t, "connstore.cas_retry", call.Events()[0].Name)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				got[m.Name] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{"connstore.cas_retry": 1}, got)
}

type spanKey struct{}

// statementSpans gives every gorm statement a span started from the
// statement's context, as a tracing plugin would; a few lines here keep
// such a plugin (and the database drivers it requires) out of this
// module's graph.
func statementSpans(t *testing.T, db *gorm.DB, tp trace.TracerProvider) {
	t.Helper()
	tracer := tp.Tracer("statements")
	before := func(db *gorm.DB) {
		ctx, span := tracer.Start(db.Statement.Context, "statement")
		db.Statement.Context = context.WithValue(ctx, spanKey{}, span)
	}
	after := func(db *gorm.DB) {
		if span, ok := db.Statement.Context.Value(spanKey{}).(trace.Span); ok {
			span.End()
		}
	}
	cb := db.Callback()
	require.NoError(t, cb.Create().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Create().After("*").Register("test:span_end", after))
	require.NoError(t, cb.Query().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Query().After("*").Register("test:span_end", after))
	require.NoError(t, cb.Update().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Update().After("*").Register("test:span_end", after))
	require.NoError(t, cb.Delete().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Delete().After("*").Register("test:span_end", after))
	require.NoError(t, cb.Row().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Row().After("*").Register("test:span_end", after))
	require.NoError(t, cb.Raw().Before("*").Register("test:span_start", before))
	require.NoError(t, cb.Raw().After("*").Register("test:span_end", after))
}
