package otelconnstore_test

import (
	"testing"
	"time"

	"github.com/connstore/connstore/otelconnstore"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Was: once a connector's queue drains (its last attempted operation
// committed), CountOperations has no attempted row for it and QueueMetrics
// stops reporting connstore.queue.due/overdue/leased for it instead of
// reporting 0: a drained queue reads as "no data", and the last exported
// value (3 due) is what a dashboard keeps showing until it goes stale.
func TestQueueMetricsDrainedQueueReportsZero(t *testing.T) {
	repo := newStore(t, repository.Options{}).Repo
	for _, id := range []string{"a", "b", "c"} {
		record(t, repo, "crm", "alice", id)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := otelconnstore.QueueMetrics(mp, repo, otelconnstore.QueueOptions{})
	require.NoError(t, err)
	defer func() { _ = reg.Unregister() }()
	crm := "connstore.connector=crm,connstore.state=attempted"
	require.Equal(t, map[string]float64{crm: 3}, points(t, reader)["connstore.queue.due"])

	ops, err := repo.ClaimOperations(t.Context(), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
	require.NoError(t, err)
	for i := range ops {
		_, err := repo.CommitOperation(t.Context(), repository.CommitParams{Fence: repository.FenceOf(&ops[i])})
		require.NoError(t, err)
	}
	require.Equal(t, map[string]float64{crm: 0}, points(t, reader)["connstore.queue.due"], "the drained queue is 0 due")
}
