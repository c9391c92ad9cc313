package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionEntriesFollowEveryWritePath: the rows to judge are the
// finished rows, whichever write finished them: a batched commit, a
// batched finish as dead, a batched reconcile-only (not finished: no
// entry), a single commit, a forced cancel; a requeue takes its row out,
// and a finish after it puts the row back.
func TestRetentionEntriesFollowEveryWritePath(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, id := range []string{"b1", "b2", "d1", "r1", "s1", "x1"} {
			recordOp(t, e, "caller", id)
		}
		claimed, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 6)
		fences := map[string]repository.Fence{}
		for i := range claimed {
			fences[claimed[i].OperationID] = repository.FenceOf(&claimed[i])
		}
		require.Empty(t, waitingIDs(t, e), "attempted rows are not judged")

		_, err = e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: fences["b1"]}, {Fence: fences["b2"]}})
		require.NoError(t, err)
		_, err = e.repo.FinishOperations(ctx(t), []repository.Fence{fences["d1"]}, models.OperationDead)
		require.NoError(t, err)
		_, err = e.repo.FinishOperations(ctx(t), []repository.Fence{fences["r1"]}, models.OperationReconcileOnly)
		require.NoError(t, err)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: fences["s1"]})
		require.NoError(t, err)
		_, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{
			OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "x1"}, Force: true})
		require.NoError(t, err)
		require.Equal(t, []string{"b1", "b2", "d1", "s1", "x1"}, waitingIDs(t, e))

		_, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{
			OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "d1"}})
		require.NoError(t, err)
		require.Equal(t, []string{"b1", "b2", "s1", "x1"}, waitingIDs(t, e))
		e.clock.Advance(time.Second)
		again, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, again, 1)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&again[0])})
		require.NoError(t, err)
		require.Equal(t, []string{"b1", "b2", "d1", "s1", "x1"}, waitingIDs(t, e))
		var entry models.RetentionPending
		require.NoError(t, e.db.Where("operation_id = ?", "d1").Take(&entry).Error)
		require.Equal(t, e.clock.Millis(), entry.UpdatedAt, "waiting as it finished the second time")
	})
}
