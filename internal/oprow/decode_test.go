package oprow

import (
	"sync"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"
)

// TestColumnsMatchTheModel: the decoder knows every column of
// models.Operation, in the model's order, and no other: a column added to,
// dropped from or moved in the model without the decoder fails here.
func TestColumnsMatchTheModel(t *testing.T) {
	s, err := schema.Parse(&models.Operation{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	require.Equal(t, s.DBNames, Names())
}

// TestSettersConvertDriverValues: each kind of column reads the values the
// two drivers return (strings or bytes, int64s, NULLs) and refuses a value
// of the wrong kind with an error naming nothing silently.
func TestSettersConvertDriverValues(t *testing.T) {
	var op models.Operation
	require.NoError(t, byName["caller_did"](&op, []byte("c")))
	require.NoError(t, byName["operation_id"](&op, "o"))
	require.NoError(t, byName["source_id"](&op, nil))
	require.NoError(t, byName["provider_etag"](&op, []byte("e")))
	require.NoError(t, byName["attempts"](&op, int64(3)))
	require.NoError(t, byName["next_attempt_at"](&op, nil))
	require.NoError(t, byName["lease_expires_at"](&op, "42"))
	require.NoError(t, byName["reissue_intent"](&op, `{"a":1}`))
	require.NoError(t, byName["result_entity"](&op, nil))
	etag, at := "e", int64(42)
	require.Equal(t, models.Operation{CallerDID: "c", OperationID: "o", ProviderEtag: &etag, Attempts: 3,
		LeaseExpiresAt: &at, ReissueIntent: models.JSON(`{"a":1}`)}, op)

	for col, v := range map[string]any{
		"caller_did": int64(1), "source_id": 3.5, "attempts": "x", "next_attempt_at": 1.5, "reissue_intent": "{",
	} {
		require.Error(t, byName[col](&op, v), col)
	}
}
