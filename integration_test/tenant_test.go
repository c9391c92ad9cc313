package integrationtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// tenantRows is every row of one owner, across all connstore tables.
func tenantRows(t *testing.T, db *gorm.DB, owner string) map[string]any {
	t.Helper()
	var (
		st  []models.SyncState
		op  []models.Operation
		w   []models.ProjectionWatch
		rc  []models.SweepReceipt
		cd  []models.SweepCandidate
		cps []models.SweepCheckpoint
	)
	for _, dest := range []any{&st, &op, &w, &rc, &cd, &cps} {
		require.NoError(t, db.Where("owner_did = ?", owner).Order("connector_name").Find(dest).Error)
	}
	return map[string]any{"sync": st, "ops": op, "watches": w, "receipts": rc, "candidates": cd, "checkpoints": cps}
}

// seedTenant gives owner one row in every table, through the unscoped
// repository, and returns the fence of its leased operation.
func seedTenant(t *testing.T, e *env, owner string) (repository.Fence, *models.ProjectionWatch) {
	t.Helper()
	c := ctx(t)
	require.NoError(t, e.repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: owner, ConnectorName: "crm"}, baseState(t)))
	for _, id := range []string{"leased", "done"} {
		in := opInput("caller-"+owner, id)
		in.OwnerDID = owner
		_, _, err := e.repo.RecordOperation(c, in)
		require.NoError(t, err)
	}
	ops, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: 2, LeaseFor: time.Hour, OwnerDID: owner})
	require.NoError(t, err)
	require.Len(t, ops, 2)
	_, err = e.repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&ops[0])})
	require.NoError(t, err)
	w, err := e.repo.ArmWatch(c, repository.ArmWatchParams{WatchKey: repository.WatchKey{OwnerDID: owner,
		ConnectorName: "crm", Model: "m", AccountKey: "a", SourceID: "s"}, DocumentID: "d"})
	require.NoError(t, err)
	rec := receipt("p1")
	rec.OwnerDID = owner
	_, err = e.repo.RecordRelistReceipt(c, rec, cands("x", "y"))
	require.NoError(t, err)
	return repository.FenceOf(&ops[1]), w
}

// TestTenantIsolation: a repository scoped to owner A never reads, claims,
// commits, collects or changes owner B's rows, through any method.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := ctx(t)
		fenceA, _ := seedTenant(t, e, "A")
		fenceB, watchB := seedTenant(t, e, "B")
		a, err := e.repo.WithScopes(c, scopes.Owner("A"))
		require.NoError(t, err)
		e.clock.Advance(2 * time.Hour) // every lease expired, every row collectable by time
		before := tenantRows(t, e.db, "B")

		bKey := repository.CandidateKey{ReceiptKey: repository.ReceiptKey{PartitionKey: repository.PartitionKey{
			OwnerDID: "B", ConnectorName: "crm", Partition: "contacts"}, Provenance: "p1"}, DocumentID: "x"}
		recomp := func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
			return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 5}, nil
		}
		inB := opInput("caller-B", "new")
		inB.OwnerDID = "B"
		recB := receipt("p2")
		recB.OwnerDID = "B"
		cases := map[string]func() error{
			"get sync state": func() error {
				_, err := a.GetSyncState(c, repository.ConnectorKey{OwnerDID: "B", ConnectorName: "crm"})
				return err
			},
			"set sync state": func() error {
				return a.SetSyncState(c, repository.ConnectorKey{OwnerDID: "B", ConnectorName: "crm"}, baseState(t))
			},
			"update progress": func() error {
				return a.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "B", ConnectorName: "crm"}, Recompute: recomp})
			},
			"delete sync state": func() error {
				return notChanged(a.DeleteSyncState(c, repository.ConnectorKey{OwnerDID: "B", ConnectorName: "crm"}))
			},
			"record operation": func() error { _, _, err := a.RecordOperation(c, inB); return err },
			"get operation": func() error {
				_, err := a.GetOperation(c, repository.OperationKey{CallerDID: "caller-B", OperationID: "leased"})
				return err
			},
			"heartbeat":      func() error { _, err := a.HeartbeatOperation(c, fenceB, time.Hour); return err },
			"release":        func() error { _, err := a.ReleaseOperation(c, fenceB); return err },
			"commit":         func() error { _, err := a.CommitOperation(c, repository.CommitParams{Fence: fenceB}); return err },
			"dead":           func() error { _, err := a.MarkOperationDead(c, fenceB); return err },
			"reconcile-only": func() error { _, err := a.MarkOperationReconcileOnly(c, fenceB); return err },
			"failure": func() error {
				_, err := a.RecordOperationFailure(c, repository.FailureParams{Fence: fenceB, Kind: "http"})
				return err
			},
			"arm watch": func() error {
				_, err := a.ArmWatch(c, repository.ArmWatchParams{WatchKey: repository.KeyOf(watchB), DocumentID: "z"})
				return err
			},
			"get watch": func() error { _, err := a.GetWatch(c, repository.KeyOf(watchB)); return err },
			"verification": func() error {
				_, err := a.RecordVerification(c, repository.VerificationParams{Watch: watchB, Outcome: models.WatchVerified,
					VerifiedDigest: models.StrPtr("v")})
				return err
			},
			"record receipt": func() error { _, err := a.RecordRelistReceipt(c, recB, cands("z")); return err },
			"replay receipt": func() error { _, err := a.RecordRelistReceipt(c, receiptOf("B", "p1"), cands("z")); return err },
			"sweep outcome": func() error {
				return changed(a.RecordSweepOutcome(c, repository.SweepOutcome{CandidateKey: bKey, Outcome: models.CandidatePresent}))
			},
			"apply failure": func() error {
				return changed(a.RecordSweepApplyFailure(c, repository.ApplyFailure{CandidateKey: bKey, LastError: "e"}))
			},
			"mark applied":      func() error { return changed(a.MarkSweepCandidateApplied(c, bKey)) },
			"commit checkpoint": func() error { _, err := a.CommitSweepCheckpoint(c, bKey.ReceiptKey); return err },
			"get checkpoint":    func() error { _, err := a.GetSweepCheckpoint(c, bKey.PartitionKey); return err },
		}
		for name, call := range cases {
			require.Error(t, call(), "%s on B's key through A's repository", name)
			require.Equal(t, before, tenantRows(t, e.db, "B"), name)
		}

		// Methods that range over many rows see only A's.
		ops, err := a.ClaimOperations(c, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"leased"}, ids(ops))
		require.Equal(t, "A", ops[0].OwnerDID)
		work, err := a.ListDueOperations(c, repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners})
		require.NoError(t, err)
		for _, op := range work.Operations {
			require.Equal(t, "A", op.OwnerDID)
		}
		for _, w := range work.Watches {
			require.Equal(t, "A", w.OwnerDID)
		}
		_, err = a.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&ops[0]), DocumentID: models.StrPtr("d")})
		require.NoError(t, err)
		_, err = a.CommitOperation(c, repository.CommitParams{Fence: fenceA})
		require.Error(t, err, "A's own stale fence is refused as usual")
		n, err := a.CollectFinishedOperations(c, repository.CollectParams{Before: e.clock.Now(), Limit: 100})
		require.NoError(t, err)
		require.Positive(t, n, "A's superseded or unlinked rows are collected")
		states, err := a.ListSyncStates(c, repository.ListSyncStatesParams{ConnectorName: "crm", Limit: 10})
		require.NoError(t, err)
		require.Len(t, states, 1)
		require.Equal(t, "A", states[0].OwnerDID)
		listed, err := a.ListOperationsByOwner(c, repository.ListOperationsParams{OwnerDID: "B", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, listed)
		receipts, err := a.ListSweepReceipts(c, repository.ConnectorKey{OwnerDID: "B", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Empty(t, receipts)
		candidates, err := a.ListSweepCandidates(c, repository.ListCandidatesParams{OwnerDID: "B", ConnectorName: "crm", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, candidates)
		require.Equal(t, before, tenantRows(t, e.db, "B"))

		_, err = e.repo.WithScopes(c, scopes.Eq("tenant_id", 7))
		require.ErrorIs(t, err, repository.ErrInvalidInput, "a scope on a column connstore tables lack is refused")
	})
}

func receiptOf(owner, provenance string) repository.RelistReceipt {
	r := receipt(provenance)
	r.OwnerDID = owner
	return r
}

// notChanged turns a silent no-op into the error the matrix expects; the
// row comparison after each call is what proves B was untouched.
func notChanged(err error) error {
	if err != nil {
		return err
	}
	return errNoop
}

// changed turns "changed nothing" into the error the matrix expects.
func changed(ok bool, err error) error {
	if err == nil && !ok {
		return errNoop
	}
	if err == nil {
		return nil
	}
	return err
}

// errNoop marks a call that reported it changed nothing.
var errNoop = errors.New("the call had no effect")
