package integrationtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestRetentionReleaseAtTheCutoffEdgeIsBounded (PostgreSQL) reaches the
// known limit RELIABILITY.md names. r, held, was last written just before
// the pass's cutoff (updated_at 50, cutoff 51), so the release places it
// at its own updated_at, in the pass's window; a newer finish on its
// document (s) makes it collectable. While the pass waits on x (locked by
// a blocker), a writer moves r to another owner by SQL, keeping its
// updated_at: its trigger writes r's new entry where the release wrote
// one, and waits on the pass; the pass, once the blocker lets go, waits on
// the writer's r. The bounds this test holds: nothing hangs, at most one
// of the two fails and only with 40P01, and once the failed call runs
// again nothing is left collectable and no row is lost. (A release that
// locked the rows it puts back removed this edge but made writers wait on
// the pass, and writers of several rows then deadlocked with it:
// TestRetentionMultiRowWriterBesideARelease.)
func TestRetentionReleaseAtTheCutoffEdgeIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	x := undocRow("x", models.OperationCommitted, "c1", "o1", 1, 50) // no document: collectable
	// Seeded in this order: the pass's delete locks rows in physical order,
	// x before r.
	seedOps(t, e, []models.Operation{x})
	seedOps(t, e, []models.Operation{docRow("r", models.OperationDead, "c1", "o1", "d", 1, 50)})
	holdWhere(t, e.db, "operation_id = 'r'")
	require.True(t, held(t, e, "r"))
	seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c1", "o1", "d", 2, 50)}) // queues d

	pass := func() error {
		_, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: time.UnixMilli(51), Limit: 10})
		return err
	}
	write := func() error {
		return e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o2' WHERE operation_id = 'r'`).Error
	}
	blocker, blockerPID := lockHolder(t, e.db)
	require.NoError(t, blocker.Exec(`SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'x' FOR UPDATE`).Error)
	passed := make(chan error, 1)
	go func() { passed <- pass() }()
	passPID := waitBlockedBy(t, e.db, blockerPID) // released d, deleting x
	written := make(chan error, 1)
	go func() { written <- write() }()
	waitBlockedBy(t, e.db, passPID) // the writer, on r's entry
	require.NoError(t, blocker.Rollback().Error)
	var passErr, writeErr error
	for range 2 {
		select {
		case passErr = <-passed:
		case writeErr = <-written:
		case <-time.After(20 * time.Second):
			t.Fatal("the pass and the writer hang")
		}
	}
	t.Logf("pass: %v; writer: %v", passErr, writeErr)
	require.False(t, passErr != nil && writeErr != nil, "one of them goes through")
	for _, err := range []error{passErr, writeErr} {
		var pgErr *pgconn.PgError
		if err != nil {
			require.True(t, errors.As(err, &pgErr), "%v", err)
			require.Equal(t, "40P01", pgErr.Code, "only a deadlock's victim fails")
		}
	}
	if writeErr != nil {
		require.NoError(t, write())
	}
	for i := 0; count(t, e.db, &models.RetentionFinished{}) > 0 || pendingCount(t, e, "r") > 0; i++ {
		require.Less(t, i, 5, "passes until nothing is queued or waiting")
		require.NoError(t, pass())
	}
	require.Zero(t, count(t, e.db, &models.Operation{}, "operation_id IN ?", []string{"x", "r"}), "x and r collected")
	require.True(t, held(t, e, "s"), "s, the newest on d, held")
}

// multiRowWriterBesideARelease: an operator's transaction requeues x (no
// document: collectable, in the pass's window), then a pass releases d and
// waits on x, then the same transaction requeues the held rows second of
// d. Neither the requeues nor the pass may wait on each other in a cycle:
// with the release's rows share-locked, the second requeue waited on the
// pass and PostgreSQL aborted the pass (40P01).
func multiRowWriterBesideARelease(t *testing.T, e *env, second []repository.OperationKey) {
	t.Helper()
	op, opPID := lockHolder(t, e.db)
	opRepo := e.repo.WithTx(op)
	_, err := opRepo.RequeueOperation(context.Background(), repository.RequeueParams{
		OperationKey: repository.OperationKey{CallerDID: "c1", OperationID: "x"}})
	require.NoError(t, err, "first requeue")
	passed := make(chan error, 1)
	go func() {
		_, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
		passed <- err
	}()
	waitBlockedBy(t, e.db, opPID) // the pass released d and waits on x
	requeued := make(chan error, 1)
	go func() {
		for _, k := range second {
			if _, err := opRepo.RequeueOperation(context.Background(), repository.RequeueParams{OperationKey: k}); err != nil {
				requeued <- err
				return
			}
		}
		requeued <- nil
	}()
	var reqErr, passErr error
	select {
	case reqErr = <-requeued:
	case passErr = <-passed:
		reqErr = <-requeued
	case <-time.After(15 * time.Second):
		t.Fatal("the requeues and the pass hang")
	}
	if reqErr == nil {
		require.NoError(t, op.Commit().Error)
	} else {
		op.Rollback()
	}
	if passErr == nil {
		passErr = <-passed
	}
	t.Logf("pass: %v; operator's later requeues: %v", passErr, reqErr)
	require.NoError(t, reqErr, "the operator's later requeues")
	require.NoError(t, passErr, "the pass")
	for _, k := range second {
		require.Equal(t, models.OperationAttempted, snapshot(t, e, k.CallerDID, k.OperationID).State)
	}
}

// TestRetentionMultiRowWriterBesideARelease (PostgreSQL): the requeue of r,
// held on d, which s (another caller and owner) queued: r stays kept, and
// only the release touches it.
func TestRetentionMultiRowWriterBesideARelease(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		x := undocRow("x", models.OperationDead, "c1", "o1", 1, 10)
		seedOps(t, e, []models.Operation{x})
		seedOps(t, e, []models.Operation{docRow("r", models.OperationDead, "c1", "o1", "d", 1, 10)})
		holdWhere(t, e.db, "operation_id = 'r'")
		require.True(t, held(t, e, "r"))
		seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c2", "o2", "d", 2, 20)})
		multiRowWriterBesideARelease(t, e, []repository.OperationKey{{CallerDID: "c1", OperationID: "r"}})
	})
}

// TestRetentionWriterOfTwoHeldRowsBesideARelease (PostgreSQL): d has two
// held rows; the operator requeues both, one after the other, while the
// pass releases d (a release that skipped a document with a row another
// transaction held still kept its other rows locked).
func TestRetentionWriterOfTwoHeldRowsBesideARelease(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		x := undocRow("x", models.OperationDead, "c1", "o1", 1, 10)
		seedOps(t, e, []models.Operation{x})
		seedOps(t, e, []models.Operation{
			docRow("r1", models.OperationDead, "c1", "o1", "d", 1, 10),
			docRow("r2", models.OperationDead, "c2", "o2", "d", 1, 10),
		})
		holdWhere(t, e.db, "operation_id IN ('r1', 'r2')")
		seedOps(t, e, []models.Operation{docRow("s", models.OperationDead, "c3", "o3", "d", 2, 20)}) // queues d
		multiRowWriterBesideARelease(t, e, []repository.OperationKey{
			{CallerDID: "c1", OperationID: "r1"}, {CallerDID: "c2", OperationID: "r2"}})
	})
}
