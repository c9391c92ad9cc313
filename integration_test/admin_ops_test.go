package integrationtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// leaseOne leases the one due operation of the test for a minute.
func leaseOne(t *testing.T, e *env) models.Operation {
	t.Helper()
	ops := claim(t, e, 1, time.Minute)
	require.Len(t, ops, 1)
	return ops[0]
}

// deadOp records an operation and gives it up, as a worker out of attempts
// would (one failure, then dead).
func deadOp(t *testing.T, e *env, caller, id string) models.Operation {
	t.Helper()
	recordOp(t, e, caller, id)
	op := leaseOne(t, e)
	status := int64(503)
	_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&op), Kind: "http", HTTPStatus: &status})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	op = leaseOne(t, e)
	w, err := e.repo.MarkOperationDead(ctx(t), repository.FenceOf(&op))
	require.NoError(t, err)
	return *w.Operation
}

func TestRequeueOperation(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		dead := deadOp(t, e, "caller", "a")
		require.Equal(t, int64(1), dead.Attempts)

		// Kept attempts: back to attempted, due now, the last answer
		// cleared (the history keeps it).
		e.clock.Advance(time.Minute)
		op, err := e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "a"}})
		require.NoError(t, err)
		require.Equal(t, models.OperationAttempted, op.State)
		require.Equal(t, int64(1), op.Attempts)
		require.Equal(t, e.clock.Millis(), *op.NextAttemptAt)
		require.Nil(t, op.LeaseToken)
		require.Nil(t, op.LastKind)
		require.Nil(t, op.LastHTTPStatus)
		hist, err := e.repo.OperationAttempts(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "a"})
		require.NoError(t, err)
		require.Len(t, hist, 2, "the failure and the end as dead")
		require.Equal(t, models.OperationDead, hist[0].State)
		require.Equal(t, "http", *hist[1].Kind)
		require.Equal(t, int64(503), *hist[1].HTTPStatus)
		require.Greater(t, op.Version, dead.Version)
		stored := snapshot(t, e, "caller", "a")
		require.Equal(t, *op, stored)
		claimed := leaseOne(t, e) // the next claim picks it up
		require.Equal(t, "a", claimed.OperationID)

		// Reset attempts, from reconcile-only.
		w, err := e.repo.MarkOperationReconcileOnly(ctx(t), repository.FenceOf(&claimed))
		require.NoError(t, err)
		require.Equal(t, models.OperationReconcileOnly, w.State)
		op, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "a"}, ResetAttempts: true})
		require.NoError(t, err)
		require.Equal(t, int64(0), op.Attempts)
		require.Equal(t, models.OperationAttempted, op.State)

		// Refusals change nothing.
		before := snapshot(t, e, "caller", "a")
		_, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "a"}})
		var se *repository.StateError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, repository.ErrWrongState)
		require.Equal(t, models.OperationAttempted, se.State)
		require.Equal(t, before, snapshot(t, e, "caller", "a"))
		_, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "missing"}})
		require.ErrorIs(t, err, repository.ErrNotFound)
		_, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "", OperationID: "a"}})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
	})
}

// A requeued dead row leaves the rows retention judges, held or not (an
// attempted row is no retention pass's to judge), and when it finishes
// again it is judged afresh: a hold left on it would keep it forever.
func TestRequeueClearsRetentionHold(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		deadOp(t, e, "caller", "a")
		require.Equal(t, 1, pendingCount(t, e, "a"), "a dead row waits to be judged")
		holdWhere(t, e.db, "operation_id = 'a'")
		_, err := e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "a"}})
		require.NoError(t, err)
		require.Zero(t, pendingCount(t, e, "a"), "an attempted row is not judged")
		require.Zero(t, count(t, e.db, &models.RetentionHeld{}, "operation_id = ?", "a"), "nor held")
		require.NoError(t, e.db.Model(&models.Operation{}).Where("operation_id = ?", "a").
			Updates(map[string]any{"state": models.OperationDead, "updated_at": e.clock.Millis() + 1}).Error)
		require.Equal(t, 1, pendingCount(t, e, "a"), "finished again, it is judged afresh")
	})
}

func TestCancelOperation(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		key := func(id string) repository.OperationKey {
			return repository.OperationKey{CallerDID: "caller", OperationID: id}
		}

		// Unleased: cancelled at once.
		recordOp(t, e, "caller", "free")
		op, err := e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("free")})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, op.State)
		require.Equal(t, repository.CancelledKind, *op.LastKind)
		require.Nil(t, op.NextAttemptAt)

		// Leased: refused without Force, nothing written.
		recordOp(t, e, "caller", "held")
		require.Equal(t, "held", leaseOne(t, e).OperationID)
		before := snapshot(t, e, "caller", "held")
		_, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("held")})
		require.ErrorIs(t, err, repository.ErrLeaseHeld)
		require.Equal(t, before, snapshot(t, e, "caller", "held"))

		// An expired lease does not hold it.
		e.clock.Advance(2 * time.Minute)
		recordOp(t, e, "caller", "expired")
		expired := leaseOne(t, e)
		require.Equal(t, "held", expired.OperationID, "the expired lease is re-claimed first")
		e.clock.Advance(2 * time.Minute)
		op, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("held")})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, op.State)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&expired)})
		require.ErrorIs(t, err, repository.ErrLeaseLost)

		// Forced: the holder's later writes are fenced out.
		live := leaseOne(t, e)
		require.Equal(t, "expired", live.OperationID)
		op, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("expired"), Force: true})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, op.State)
		require.Nil(t, op.LeaseToken)
		require.Equal(t, "", *op.EndedLeaseToken, "ended by an operator: no holder's token")
		for name, write := range map[string]func() error{
			"commit": func() error {
				_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&live)})
				return err
			},
			"heartbeat": func() error {
				_, err := e.repo.HeartbeatOperation(ctx(t), repository.FenceOf(&live), time.Minute)
				return err
			},
			"failure": func() error {
				_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&live), Kind: "timeout"})
				return err
			},
			"dead": func() error {
				_, err := e.repo.MarkOperationDead(ctx(t), repository.FenceOf(&live))
				return err
			},
		} {
			err := write()
			var lost *repository.LeaseLostError
			require.ErrorAs(t, err, &lost, name)
			require.Equal(t, repository.LeaseLostFinished, lost.Reason, name)
		}
		require.Equal(t, repository.CancelledKind, *snapshot(t, e, "caller", "expired").LastKind)

		// Finished and missing operations are refused.
		_, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("free"), Force: true})
		require.ErrorIs(t, err, repository.ErrWrongState)
		_, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: key("nope")})
		require.ErrorIs(t, err, repository.ErrNotFound)

		// Requeue brings a cancelled operation back.
		op, err = e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: key("free")})
		require.NoError(t, err)
		require.Equal(t, models.OperationAttempted, op.State)
	})
}

// A forced cancel racing the live holder's commit: exactly one wins, the
// other gets its typed refusal, and the row shows the winner's write.
func TestCancelRacesCommit(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		_, other := instance(t, e, repository.Options{})
		wins := map[string]int{}
		for i := range 30 {
			id := fmt.Sprintf("race-%d", i)
			recordOp(t, e, "caller", id)
			op := leaseOne(t, e)
			var cancelErr, commitErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				_, cancelErr = other.CancelOperation(ctx(t), repository.CancelParams{
					OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: id}, Force: true})
			})
			wg.Go(func() {
				<-start
				_, commitErr = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&op)})
			})
			close(start)
			wg.Wait()
			stored := snapshot(t, e, "caller", id)
			switch {
			case cancelErr == nil:
				require.ErrorIs(t, commitErr, repository.ErrLeaseLost, id)
				require.Equal(t, models.OperationDead, stored.State)
				wins["cancel"]++
			case commitErr == nil:
				require.ErrorIs(t, cancelErr, repository.ErrWrongState, id)
				require.Equal(t, models.OperationCommitted, stored.State)
				wins["commit"]++
			default:
				t.Fatalf("%s: both refused: cancel %v, commit %v", id, cancelErr, commitErr)
			}
		}
		t.Logf("winners: %v", wins)
	})
}

func TestCountAndListOperations(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		in := func(owner, connector, id string) repository.OperationInput {
			i := opInput("caller", id)
			i.OwnerDID, i.ConnectorName = owner, connector
			return i
		}
		for _, x := range []repository.OperationInput{
			in("alice", "crm", "a1"), in("alice", "crm", "a2"), in("alice", "crm", "a3"), in("alice", "crm", "a4"),
			in("alice", "mail", "m1"), in("bob", "crm", "b1"),
		} {
			_, _, err := e.repo.RecordOperation(ctx(t), x)
			require.NoError(t, err)
		}
		e.clock.Advance(5 * time.Minute) // a1..b1 have been due for 5 minutes
		ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Hour, ConnectorName: "crm", OwnerDID: "alice"})
		require.NoError(t, err)
		require.Equal(t, "a1", ops[0].OperationID)
		_, err = e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: repository.OperationKey{CallerDID: "caller", OperationID: "a2"}})
		require.NoError(t, err)
		_, _, err = e.repo.RecordOperation(ctx(t), in("alice", "crm", "a5")) // due now, not overdue
		require.NoError(t, err)

		counts, err := e.repo.CountOperations(ctx(t), repository.OperationCountsParams{})
		require.NoError(t, err)
		require.Equal(t, []repository.OperationCount{
			{ConnectorName: "crm", OwnerDID: "alice", State: models.OperationAttempted, Count: 4, Due: 3, Leased: 1, Overdue: 2, OldestDue: 5 * time.Minute},
			{ConnectorName: "crm", OwnerDID: "alice", State: models.OperationDead, Count: 1},
			{ConnectorName: "crm", OwnerDID: "bob", State: models.OperationAttempted, Count: 1, Due: 1, Overdue: 1, OldestDue: 5 * time.Minute},
			{ConnectorName: "mail", OwnerDID: "alice", State: models.OperationAttempted, Count: 1, Due: 1, Overdue: 1, OldestDue: 5 * time.Minute},
		}, counts)

		counts, err = e.repo.CountOperations(ctx(t), repository.OperationCountsParams{OwnerDID: "alice", ConnectorName: "crm",
			States: []string{models.OperationAttempted}, OverdueAfter: 10 * time.Minute})
		require.NoError(t, err)
		require.Equal(t, []repository.OperationCount{
			{ConnectorName: "crm", OwnerDID: "alice", State: models.OperationAttempted, Count: 4, Due: 3, Leased: 1, OldestDue: 5 * time.Minute},
		}, counts)

		// A scoped repository counts its own rows only.
		bobs, err := e.repo.WithScopes(ctx(t), scopes.Owner("bob"))
		require.NoError(t, err)
		counts, err = bobs.CountOperations(ctx(t), repository.OperationCountsParams{})
		require.NoError(t, err)
		require.Len(t, counts, 1)
		require.Equal(t, "bob", counts[0].OwnerDID)

		// Overdue listing: due for over a minute and unclaimed, paged.
		var ids []string
		var after *repository.ListCursor
		for {
			page, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{Overdue: true, After: after, Limit: 2})
			require.NoError(t, err)
			for _, op := range page {
				ids = append(ids, op.OperationID)
			}
			if len(page) < 2 {
				break
			}
			after = repository.CursorAfter(&page[1])
		}
		require.Equal(t, []string{"a3", "a4", "b1", "m1"}, ids)

		dead, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead, Limit: 10})
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Equal(t, "a2", dead[0].OperationID)
		none, err := bobs.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, none)
	})
}

func TestAdminCallsRefuseBadInput(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		for name, call := range map[string]func() error{
			"unknown state": func() error {
				_, err := e.repo.CountOperations(ctx(t), repository.OperationCountsParams{States: []string{"paused"}})
				return err
			},
			"negative overdue": func() error {
				_, err := e.repo.CountOperations(ctx(t), repository.OperationCountsParams{OverdueAfter: -time.Second})
				return err
			},
			"bad owner": func() error {
				_, err := e.repo.CountOperations(ctx(t), repository.OperationCountsParams{OwnerDID: "a\x00b"})
				return err
			},
			"list without limit": func() error {
				_, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead})
				return err
			},
			"overdue dead": func() error {
				_, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead, Overdue: true, Limit: 1})
				return err
			},
			"empty state": func() error {
				_, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{Limit: 1})
				return err
			},
			"bad cursor": func() error {
				_, err := e.repo.ListOperationsByState(ctx(t), repository.ListByStateParams{State: models.OperationDead, Limit: 1, After: &repository.ListCursor{}})
				return err
			},
			"cancel without id": func() error {
				_, err := e.repo.CancelOperation(ctx(t), repository.CancelParams{OperationKey: repository.OperationKey{CallerDID: "c"}})
				return err
			},
			"status unknown": func() error {
				_, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, Status: "paused"})
				return err
			},
			"status bad error text": func() error {
				msg := "bad\xff"
				_, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, Status: models.SyncStatusError, Error: &msg})
				return err
			},
		} {
			require.ErrorIs(t, call(), repository.ErrInvalidInput, name)
		}
	})
}

func TestSetSyncStatus(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		_, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, Status: models.SyncStatusSyncing})
		require.ErrorIs(t, err, repository.ErrNotFound)

		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, repository.SyncStateInput{
			Checkpoint: models.JSON(`{"page":7}`), LastSyncedAt: "t1", EntityCount: 70, Status: models.SyncStatusIdle}))
		before, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)

		msg := "provider down"
		row, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{
			Key:    repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Status: models.SyncStatusError, Error: &msg, IfStatus: []string{models.SyncStatusIdle, models.SyncStatusSyncing}})
		require.NoError(t, err)
		stored, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Equal(t, row, stored)
		require.Equal(t, models.SyncStatusError, stored.Status)
		require.Equal(t, msg, *stored.Error)
		require.Equal(t, before.Version+1, stored.Version)
		require.Equal(t, before.Incarnation, stored.Incarnation)
		require.JSONEq(t, `{"page":7}`, string(stored.Checkpoint))
		require.Equal(t, int64(70), stored.EntityCount)
		require.Equal(t, "t1", stored.LastSyncedAt)

		// The expected status no longer holds: refused, nothing written.
		_, err = e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{
			Key:    repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Status: models.SyncStatusIdle, IfStatus: []string{models.SyncStatusSyncing}})
		var se *repository.StateError
		require.ErrorAs(t, err, &se)
		require.Equal(t, models.SyncStatusError, se.State)
		again, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Equal(t, stored, again)
	})
}

// SetSyncStatus from one instance racing progress updates from another:
// every progress step lands (the checkpoint counts them) and the last
// status written is the one stored.
func TestSetSyncStatusRacesProgress(t *testing.T) {
	forEachDB(t, func(t *testing.T, e *env) {
		_, other := instance(t, e, repository.Options{})
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, repository.SyncStateInput{
			Checkpoint: models.JSON(`{"n":0}`), LastSyncedAt: "t", Status: models.SyncStatusIdle}))
		const steps, flips = 60, 40
		step := func(cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			var n int
			_, err := fmt.Sscanf(string(cur.Checkpoint), `{"n":%d}`, &n)
			if err != nil {
				return repository.SyncProgressResult{}, err
			}
			return repository.SyncProgressResult{Checkpoint: models.JSON(fmt.Sprintf(`{"n":%d}`, n+1)), LastSyncedAt: "t", EntityCount: int64(n + 1)}, nil
		}
		retries := 1000
		var wg sync.WaitGroup
		errs := make(chan error, steps+flips)
		wg.Go(func() {
			for range steps {
				errs <- e.repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
					Key:        repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
					MaxRetries: &retries, Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
						return step(cur)
					}})
			}
		})
		statuses := []string{models.SyncStatusSyncing, models.SyncStatusIdle}
		wg.Go(func() {
			for i := range flips {
				_, err := other.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{
					Key:    repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
					Status: statuses[i%2], MaxRetries: &retries})
				errs <- err
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		row, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, steps), string(row.Checkpoint), "a progress step was lost")
		require.Equal(t, int64(steps), row.EntityCount)
		require.Equal(t, statuses[(flips-1)%2], row.Status, "the last status was lost")
		require.Equal(t, int64(steps+flips), row.Version, "every write bumped the version once")
	})
}
