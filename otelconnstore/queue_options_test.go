package otelconnstore_test

import (
	"testing"
	"time"

	"github.com/connstore/connstore/otelconnstore"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Was: QueueMetrics registers with an OverdueAfter CountOperations
// refuses (negative); every collection then fails and no queue gauge is
// ever reported. The bad option should be refused at registration with
// ErrInvalidInput, as a nil repository is.
func TestQueueMetricsRefusesNegativeOverdueAfter(t *testing.T) {
	repo := newStore(t, repository.Options{}).Repo
	record(t, repo, "crm", "alice", "a")
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := otelconnstore.QueueMetrics(mp, repo, otelconnstore.QueueOptions{OverdueAfter: -time.Second})
	if err == nil {
		defer func() { _ = reg.Unregister() }()
	}
	require.ErrorIs(t, err, repository.ErrInvalidInput, "registered anyway; every collection will fail")
}
