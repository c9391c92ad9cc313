package repository

import (
	"fmt"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
)

// TestParamsPrintTheirFields: a params struct naming a sync-state row
// prints all its fields with %+v, not only the key (an embedded
// ConnectorKey's String method would be promoted and print "owner/crm").
func TestParamsPrintTheirFields(t *testing.T) {
	msg := "token revoked"
	key := ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}
	status := fmt.Sprintf("%+v", SetSyncStatusParams{Key: key, Status: models.SyncStatusError, Error: &msg})
	require.Contains(t, status, "Status:error")
	require.Contains(t, status, "Key:owner/crm")
	progress := fmt.Sprintf("%+v", UpdateSyncProgressParams{Key: key})
	require.Contains(t, progress, "MaxRetries:")
}
