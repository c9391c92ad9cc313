package connstoretest_test

import (
	"context"
	"testing"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
)

// input is the operation the README's test works.
var input = inputFor("create-contact")

// createContact is a connector's handler: here it writes nothing and
// commits.
func createContact(context.Context, *models.Operation) worker.Result {
	return worker.Commit(nil, nil, nil)
}

// TestCreateContact is the README's example of testing a handler.
func TestCreateContact(t *testing.T) {
	s := connstoretest.SQLite(t, connstoretest.Options{})
	op, _ := connstoretest.WorkOne(t, s, input, createContact)
	require.Equal(t, models.OperationCommitted, op.State)
}
