package migrations_test

import (
	"strings"
	"testing"

	"github.com/connstore/connstore/migrations"
	"github.com/stretchr/testify/require"
)

func TestPartitionedLayout(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 1025} {
		_, err := migrations.PartitionedLayout(n)
		require.Error(t, err, n)
	}
	ddl, err := migrations.PartitionedLayout(3)
	require.NoError(t, err)
	require.Len(t, ddl, 7*(1+3), "seven tables, each with three partitions")
	require.Contains(t, ddl, "CREATE TABLE kubun_connector_operation_p2 PARTITION OF kubun_connector_operation FOR VALUES WITH (MODULUS 3, REMAINDER 2)")
	for _, stmt := range ddl {
		if strings.Contains(stmt, "PARTITION BY") {
			require.Contains(t, stmt, "PRIMARY KEY", stmt)
		}
	}
	big, err := migrations.PartitionedLayout(12)
	require.NoError(t, err)
	require.Contains(t, big, "CREATE TABLE kubun_connector_sync_state_p11 PARTITION OF kubun_connector_sync_state FOR VALUES WITH (MODULUS 12, REMAINDER 11)")
}
