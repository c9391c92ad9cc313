package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestRetentionOwnerChangeOfANewerRowReleases: a is held (the newest commit
// of its owner o1 on d); b, a newer commit of the same caller on d (owner
// o2), moves to owner o1. a is now superseded for its caller and its owner
// (collectable). When only a change of state or document queued a release
// of d, a stayed held forever; every column the keep rules compare now
// does.
func TestRetentionOwnerChangeOfANewerRowReleases(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		requireSiblingMoveReleases(t, e, docRow("b", models.OperationCommitted, "c1", "o2", "d", 2, 11), "owner_did = 'o1'")
	})
}

// requireSiblingMoveReleases seeds a (caller c1, owner o1, document d),
// then b, a newer commit on d that shares one of a's caller and owner;
// after a pass holds both, b is changed by set (SQL) to share the other
// too, which makes a collectable; the passes after it must collect a.
func requireSiblingMoveReleases(t *testing.T, e *env, b models.Operation, set string) {
	t.Helper()
	seedOps(t, e, []models.Operation{docRow("a", models.OperationCommitted, "c1", "o1", "d", 1, 10), b})
	require.Zero(t, passWith(t, e, e.repo, ""))
	require.True(t, held(t, e, "a"))
	require.True(t, held(t, e, "b"))
	require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET `+set+` WHERE operation_id = 'b'`).Error)
	var all []models.Operation
	require.NoError(t, e.db.Find(&all).Error)
	for i := range all {
		if all[i].OperationID == "a" {
			require.True(t, refCollectable(all, &all[i]), "a is collectable by the keep rules")
		}
	}
	e.clock.Advance(time.Second)
	for range 5 {
		passWith(t, e, e.repo, "")
	}
	t.Logf("held: %v waiting: %v", heldIDs(t, e), waitingIDs(t, e))
	require.False(t, stored(t, e, "a"), "a, collectable, stays held (leak)")
}

// TestRetentionRequeueRacingReleaseDoesNotDeadlock (PostgreSQL): r, a dead row on d, is
// held; s, a newer dead row of the same caller and owner on d, finishes
// (queues d; r is now collectable). A pass releases d (deleting r's held
// entry) and, before deleting r, waits on another candidate x (a lock
// holder). An operator requeues r meanwhile: its UPDATE locks r, and its
// trigger waited on r's held entry, which the pass deleted; the pass then
// reached r and waited on the requeue: a deadlock, PostgreSQL aborted one
// of them (40P01). The trigger now skips an entry a pass has locked.
func TestRetentionRequeueRacingReleaseDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	func(t *testing.T, e *env) {
		x := undocRow("x", models.OperationCommitted, "c1", "o1", 1, 50) // no document: collectable
		// x first: a lower physical id than r (the delete locks in id order).
		seedOps(t, e, []models.Operation{x})
		seedOps(t, e, []models.Operation{docRow("r", models.OperationDead, "c1", "o1", "d", 1, 10)})
		n, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: time.UnixMilli(20), Limit: 10})
		require.NoError(t, err)
		require.Zero(t, n)
		require.True(t, held(t, e, "r"))
		seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c1", "o1", "d", 2, 20)})

		blocker, blockerPID := lockHolder(t, e.db)
		require.NoError(t, blocker.Exec(`SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'x' FOR UPDATE`).Error)
		done := make(chan error, 1)
		go func() {
			_, err := e.repo.CollectFinishedOperations(context.Background(),
				repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
			done <- err
		}()
		waitBlockedBy(t, e.db, blockerPID) // released d, deleting x
		requeued := make(chan error, 1)
		go func() {
			_, err := e.repo.RequeueOperation(context.Background(), repository.RequeueParams{
				OperationKey: repository.OperationKey{CallerDID: "c1", OperationID: "r"}})
			requeued <- err
		}()
		// The requeue's trigger skips r's held entry, which the pass's
		// release has locked: it waited on the pass, and the pass, once the
		// blocker let it go, on the requeue's lock of r.
		var reqErr error
		select {
		case reqErr = <-requeued:
		case <-time.After(10 * time.Second):
			t.Fatal("the requeue waits on the pass")
		}
		require.NoError(t, blocker.Rollback().Error)
		passErr := <-done
		t.Logf("pass: %v; requeue: %v", passErr, reqErr)
		require.NoError(t, passErr, "the pass")
		require.NoError(t, reqErr, "the operator's requeue")
	}(t, setup(t, pgKind))
}
