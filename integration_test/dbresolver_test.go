package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"
)

// TestReadReplicaRouting: behind dbresolver with a second database (its own
// CREATE DATABASE) as the replica, every read a write depends on, and every Get, goes to the source:
// the flow behaves as it does without dbresolver. The listing reads the docs
// name go to the replica, and the replica never receives a write.
func TestReadReplicaRouting(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	replicaDSN := pgDatabaseDSN(t)
	replica := openDSN(t, pgKind, replicaDSN)
	require.NoError(t, migrations.Migrate(context.Background(), replica))
	db := openDSN(t, pgKind, e.dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
	require.NoError(t, db.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.Open(replicaDSN)}})))
	repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
	require.NoError(t, err)
	c := ctx(t)

	require.NoError(t, repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
	_, err = repo.GetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
	require.NoError(t, err, "a Get reads the source")
	for range 3 {
		require.NoError(t, repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
			Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 1}, nil
			}}), "the CAS read goes to the source")
	}
	st, err := repo.GetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Version)

	_, _, err = repo.RecordOperation(c, opInput("caller", "op"))
	require.NoError(t, err)
	replay, created, err := repo.RecordOperation(c, opInput("caller", "op"))
	require.NoError(t, err, "a replay reads the source")
	require.False(t, created)
	require.Equal(t, "op", replay.OperationID)
	ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, ops, 1)
	f := repository.FenceOf(&ops[0])
	_, err = repo.CommitOperation(c, repository.CommitParams{Fence: f, DocumentID: models.StrPtr("d")})
	require.NoError(t, err)
	again, err := repo.CommitOperation(c, repository.CommitParams{Fence: f, DocumentID: models.StrPtr("d")})
	require.NoError(t, err, "the fenced re-read goes to the source")
	require.True(t, again.Replay)

	// Every fenced write re-reads the row it refused on the source.
	for _, id := range []string{"hb", "rel", "dead", "fail"} {
		_, _, err = repo.RecordOperation(c, opInput("caller", id))
		require.NoError(t, err)
	}
	leased, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, leased, 4)
	fences := map[string]repository.Fence{}
	for i := range leased {
		fences[leased[i].OperationID] = repository.FenceOf(&leased[i])
	}
	_, err = repo.HeartbeatOperation(c, fences["hb"], time.Minute)
	require.NoError(t, err)
	rel, err := repo.ReleaseOperation(c, fences["rel"])
	require.NoError(t, err)
	again2, err := repo.ReleaseOperation(c, fences["rel"])
	require.NoError(t, err)
	require.True(t, again2.Replay && !rel.Replay)
	_, err = repo.MarkOperationDead(c, fences["dead"])
	require.NoError(t, err)
	failed, err := repo.RecordOperationFailure(c, repository.FailureParams{Fence: fences["fail"], Kind: "timeout"})
	require.NoError(t, err, "the failure's attempts read goes to the source")
	require.Equal(t, int64(1), failed.Attempts)
	_, err = repo.GetOperation(c, repository.OperationKey{CallerDID: "caller", OperationID: "dead"})
	require.NoError(t, err)

	key := repository.WatchKey{OwnerDID: "o", ConnectorName: "crm", Model: "m", AccountKey: "a", SourceID: "s"}
	w, err := repo.ArmWatch(c, repository.ArmWatchParams{WatchKey: key, DocumentID: "d"})
	require.NoError(t, err, "the read after the write goes to the source")
	_, err = repo.RecordVerification(c, repository.VerificationParams{Watch: w, Outcome: models.WatchVerified,
		VerifiedDigest: models.StrPtr("x")})
	require.NoError(t, err)

	_, err = repo.GetWatch(c, key)
	require.NoError(t, err)

	_, err = repo.RecordRelistReceipt(c, receipt("p1"), cands("a", "b"))
	require.NoError(t, err)
	ok, err := repo.RecordSweepOutcome(c, repository.SweepOutcome{CandidateKey: candKey("p1", "a"), Outcome: models.CandidatePresent})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = repo.MarkSweepCandidateApplied(c, candKey("p1", "a"))
	require.NoError(t, err)
	require.True(t, ok)
	for range repository.MaxSweepApplyAttempts {
		_, err = repo.RecordSweepApplyFailure(c, repository.ApplyFailure{CandidateKey: candKey("p1", "b"), LastError: "e"})
		require.NoError(t, err)
	}
	_, err = repo.CommitSweepCheckpoint(c, receiptKey("p1"))
	require.NoError(t, err)
	cp, err := repo.GetSweepCheckpoint(c, partition)
	require.NoError(t, err)
	require.Equal(t, "p1", cp.Provenance)

	// Listing reads may use the replica, which is empty here.
	states, err := repo.ListSyncStates(c, repository.ListSyncStatesParams{ConnectorName: "crm", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, states, "ListSyncStates reads the replica")
	listed, err := repo.ListOperationsByOwner(c, repository.ListOperationsParams{OwnerDID: "owner", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, listed, "ListOperationsByOwner reads the replica")

	e.clock.Advance(time.Hour)
	n, err := repo.CollectFinishedOperations(c, repository.CollectParams{Before: e.clock.Now(), Limit: 10})
	require.NoError(t, err)
	require.Positive(t, n, "retention deletes on the source")
	require.NoError(t, repo.DeleteSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}))
	_, err = repo.GetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
	require.ErrorIs(t, err, repository.ErrNotFound)
	work, err := repo.ListDueOperations(c, repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners})
	require.NoError(t, err)
	require.Empty(t, work.Operations, "the due sweep reads the replica")
	rs, err := repo.ListSweepReceipts(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"})
	require.NoError(t, err)
	require.Empty(t, rs, "ListSweepReceipts reads the replica")

	for _, m := range models.All() {
		require.Zero(t, count(t, replica, m), "the replica never receives a write (%T)", m)
	}
}
