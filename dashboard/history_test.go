package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestDashboardOperationHistory: the operation page shows the last answer
// with its message and every answer of its history, newest first, values
// escaped; the JSON twin carries the history.
func TestDashboardOperationHistory(t *testing.T) {
	dbtest.Each(t, dbtest.Suite(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		c := context.Background()
		_, _, err := e.Repo.RecordOperation(c, input("op-1"))
		require.NoError(t, err)
		status503, status422 := int64(503), int64(422)
		ops, err := e.Repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		_, err = e.Repo.RecordOperationFailure(c, repository.FailureParams{Fence: repository.FenceOf(&ops[0]),
			Kind: "http", HTTPStatus: &status503, Message: "upstream " + evil})
		require.NoError(t, err)
		require.NoError(t, e.DB.Model(&models.Operation{}).Where("operation_id = ?", "op-1").Update("next_attempt_at", 0).Error)
		ops, err = e.Repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		_, err = e.Repo.FinishOperationsWith(c, []repository.FinishParams{{Fence: repository.FenceOf(&ops[0]),
			Kind: "validation", HTTPStatus: &status422, Message: "email is not an address"}}, models.OperationDead)
		require.NoError(t, err)

		srv := serve(t, e.Repo, dashboard.Options{})
		status, body, _ := get(t, srv, "/ops/operation?caller=caller&op=op-1")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "Last answer: validation HTTP 422: email is not an address.")
		require.Regexp(t, `(?s)validation</td><td>422</td><td>email is not an address.*http</td><td>503</td><td>upstream &lt;script&gt;`, body)
		require.NotContains(t, body, evil)

		_, body, _ = get(t, srv, "/ops/operation?caller=caller&op=op-1&format=json")
		var twin struct {
			History []models.OperationAttempt `json:"history"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &twin))
		require.Len(t, twin.History, 2)
		require.Equal(t, "validation", *twin.History[0].Kind)
		require.Equal(t, "upstream "+evil, *twin.History[1].Message)
	})
}
