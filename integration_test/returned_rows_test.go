package integrationtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestWritesReturnTheStoredRow: every write that returns operation rows (a
// claim, a single and a batched lease-holder write, an operator's requeue
// and cancel) returns each row exactly as a later read finds it, every
// column, NULL or set. The writes read their RETURNING rows with their own
// scanner, reads with gorm's: a column read into the wrong field, or a
// NULL read as a value, fails here.
func TestWritesReturnTheStoredRow(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		stored := func(op models.Operation) {
			t.Helper()
			got, err := e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: op.CallerDID, OperationID: op.OperationID})
			require.NoError(t, err)
			require.Equal(t, *got, op)
		}
		// Half the operations carry every optional column, half none.
		for i := range 6 {
			in := opInput("caller", fmt.Sprintf("rt%d", i))
			in.OwnerDID = "rt"
			if i%2 == 0 {
				src, doc := fmt.Sprintf("src-%d", i), fmt.Sprintf("doc-%d", i)
				in.SourceID, in.DocumentID = &src, &doc
			}
			_, _, err := e.repo.RecordOperation(ctx(t), in)
			require.NoError(t, err)
		}
		claimed, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 6, LeaseFor: time.Minute, OwnerDID: "rt"})
		require.NoError(t, err)
		require.Len(t, claimed, 6)
		for _, op := range claimed {
			require.NotNil(t, op.LeaseToken)
			stored(op)
		}

		// A single failure, with a status: last_kind, last_http_status and
		// next_attempt_at set, the lease ended.
		status := int64(503)
		w, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&claimed[0]),
			Kind: "http", HTTPStatus: &status})
		require.NoError(t, err)
		require.Equal(t, int64(503), *w.LastHTTPStatus)
		require.NotNil(t, w.EndedLeaseToken)
		stored(*w.Operation)

		// A single commit with etag, document and result.
		etag, doc := "etag-1", "doc-1"
		w, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&claimed[1]),
			ProviderEtag: &etag, DocumentID: &doc, ResultEntity: models.JSON(`{"id":1}`)})
		require.NoError(t, err)
		require.Equal(t, models.OperationCommitted, w.State)
		stored(*w.Operation)

		// A batch: commits with and without the optional values.
		out, err := e.repo.CommitOperations(ctx(t), []repository.CommitParams{
			{Fence: repository.FenceOf(&claimed[2]), ProviderEtag: &etag, ResultEntity: models.JSON(`{"id":2}`)},
			{Fence: repository.FenceOf(&claimed[3])},
		})
		require.NoError(t, err)
		for _, o := range out {
			require.NoError(t, o.Err)
			stored(*o.Write.Operation)
		}

		// An operator's cancel (forced past the live lease) and requeue.
		cancelled, err := e.repo.CancelOperation(ctx(t), repository.CancelParams{
			OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: claimed[4].OperationID}, Force: true})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, cancelled.State)
		stored(*cancelled)
		requeued, err := e.repo.RequeueOperation(ctx(t), repository.RequeueParams{
			OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: claimed[4].OperationID}})
		require.NoError(t, err)
		require.Equal(t, models.OperationAttempted, requeued.State)
		stored(*requeued)
	})
}
