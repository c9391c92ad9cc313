package repository_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/connstore/connstore/sqliteconn"
	"gorm.io/gorm"
)

// Example shows the three setup lines on a SQLite file.
func Example() {
	dir, _ := os.MkdirTemp("", "connstore")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := sqliteconn.Open(filepath.Join(dir, "app.db"), sqliteconn.Options{})
	if err != nil {
		panic(err)
	}
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		panic(err)
	}
	if err := migrations.Migrate(ctx, db); err != nil {
		panic(err)
	}
	repo, err := repository.New(db, repository.Options{})
	if err != nil {
		panic(err)
	}
	_, err = repo.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"})
	fmt.Println(errors.Is(err, repository.ErrNotFound))
	// Output: true
}

// ExampleRepository_UpdateSyncProgress records three pages of progress by
// compare-and-swap; Recompute rebases on the stored checkpoint each time.
func ExampleRepository_UpdateSyncProgress() {
	_, repo, _, done := newExample()
	defer done()
	ctx := context.Background()

	type cursor struct{ Page int }
	for range 3 {
		err := repo.UpdateSyncProgress(ctx, repository.UpdateSyncProgressParams{
			Key: repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"},
			Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				var c cursor
				if cur != nil { // nil on the first write: there is no row yet
					if err := cur.Checkpoint.Decode(&c); err != nil {
						return repository.SyncProgressResult{}, err
					}
				}
				c.Page++
				doc, err := models.NewJSON(c)
				return repository.SyncProgressResult{Checkpoint: doc, LastSyncedAt: "2026-12-02T09:00:00Z",
					EntityCount: int64(c.Page * 100)}, err
			},
		})
		if err != nil {
			panic(err)
		}
	}
	st, err := repo.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Checkpoint, st.EntityCount, st.Version, st.Status)
	// Output: {"Page":3} 300 2 idle
}

// ExampleRepository_ClaimOperations records an outbound write, leases it,
// fails once (backing off), re-drives and commits it; a retried commit
// after a lost reply is a replay, and a stale fence is refused.
func ExampleRepository_ClaimOperations() {
	_, repo, clock, done := newExample()
	defer done()
	ctx := context.Background()

	_, _, err := repo.RecordOperation(ctx, repository.OperationInput{
		CallerDID: "did:example:alice", OperationID: "op-1", NodeKey: "node-1", OwnerDID: "did:example:alice",
		ConnectorName: "crm", Model: "contact", Op: "create", AccountKey: "acct", Target: "contacts",
		DeterministicEventID: "evt-1", PayloadHash: "sha256:abc", ReissueIntent: models.JSON(`{"name":"Ada"}`),
	})
	if err != nil {
		panic(err)
	}
	ops, err := repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	if err != nil {
		panic(err)
	}
	status := int64(503)
	failed, err := repo.RecordOperationFailure(ctx, repository.FailureParams{
		Fence: repository.FenceOf(&ops[0]), Kind: "http", HTTPStatus: &status})
	if err != nil {
		panic(err)
	}
	fmt.Println("attempts:", failed.Attempts, "next in", time.UnixMilli(*failed.NextAttemptAt).Sub(clock.Now()))

	clock.Advance(time.Minute)
	ops, err = repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	if err != nil {
		panic(err)
	}
	commit := repository.CommitParams{Fence: repository.FenceOf(&ops[0]), DocumentID: models.StrPtr("doc-1")}
	res, err := repo.CommitOperation(ctx, commit)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State, *res.DocumentID, "replay:", res.Replay)
	res, err = repo.CommitOperation(ctx, commit) // the reply was lost: retry
	if err != nil {
		panic(err)
	}
	fmt.Println("retried commit replay:", res.Replay)

	var lost *repository.LeaseLostError
	_, err = repo.MarkOperationDead(ctx, commit.Fence)
	fmt.Println(errors.As(err, &lost), lost.Reason)
	// Output:
	// attempts: 1 next in 1m0s
	// committed doc-1 replay: false
	// retried commit replay: true
	// true operation already finished
}

// appRecord is an application's own table, written in the same transaction.
type appRecord struct {
	ID   int64 `gorm:"primaryKey"`
	Note string
}

// ExampleRepository_Transaction makes an application write and repository
// calls in one transaction: an error rolls back both.
func ExampleRepository_Transaction() {
	db, repo, _, done := newExample()
	defer done()
	ctx := context.Background()
	if err := db.AutoMigrate(&appRecord{}); err != nil {
		panic(err)
	}

	err := repo.Transaction(ctx, func(tx *gorm.DB, repo *repository.Repository) error {
		if err := tx.Create(&appRecord{ID: 1, Note: "connected"}).Error; err != nil {
			return err
		}
		if err := repo.SetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"}, repository.SyncStateInput{
			LastSyncedAt: "never", Status: models.SyncStatusIdle}); err != nil {
			return err
		}
		return errors.New("the app changed its mind")
	})
	var n int64
	db.Model(&appRecord{}).Count(&n)
	_, getErr := repo.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"})
	fmt.Println(err, n, errors.Is(getErr, repository.ErrNotFound))
	// Output: the app changed its mind 0 true
}

// ExampleRepository_WithTx joins a transaction the application began on
// its own handle: both writes commit together.
func ExampleRepository_WithTx() {
	db, repo, _, done := newExample()
	defer done()
	ctx := context.Background()
	if err := db.AutoMigrate(&appRecord{}); err != nil {
		panic(err)
	}

	err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&appRecord{ID: 1, Note: "connected"}).Error; err != nil {
			return err
		}
		return repo.WithTx(tx).SetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"}, repository.SyncStateInput{
			LastSyncedAt: "never", Status: models.SyncStatusIdle})

	})
	if err != nil {
		panic(err)
	}
	st, err := repo.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:alice", ConnectorName: "crm"})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.LastSyncedAt, st.Version)
	// Output: never 0
}

// ExampleRepository_WithScopes confines a repository to one tenant: it
// cannot read or create another owner's rows.
func ExampleRepository_WithScopes() {
	_, repo, _, done := newExample()
	defer done()
	ctx := context.Background()
	state := repository.SyncStateInput{LastSyncedAt: "never", Status: models.SyncStatusIdle}
	for _, owner := range []string{"did:example:alice", "did:example:bob"} {
		if err := repo.SetSyncState(ctx, repository.ConnectorKey{OwnerDID: owner, ConnectorName: "crm"}, state); err != nil {
			panic(err)
		}
	}

	alice, err := repo.WithScopes(ctx, scopes.Owner("did:example:alice"))
	if err != nil {
		panic(err)
	}
	rows, err := alice.ListSyncStates(ctx, repository.ListSyncStatesParams{ConnectorName: "crm", Limit: 10})
	if err != nil {
		panic(err)
	}
	_, getErr := alice.GetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:bob", ConnectorName: "crm"})
	setErr := alice.SetSyncState(ctx, repository.ConnectorKey{OwnerDID: "did:example:carol", ConnectorName: "crm"}, state)
	fmt.Println(len(rows), rows[0].OwnerDID, errors.Is(getErr, repository.ErrNotFound), errors.Is(setErr, repository.ErrOutOfScope))
	// Output: 1 did:example:alice true true
}

// ExampleRepository_IterDue streams the due sweep: due operations, then
// watches whose schedule is due or whose winner moved.
func ExampleRepository_IterDue() {
	_, repo, clock, done := newExample()
	defer done()
	ctx := context.Background()
	key := repository.WatchKey{OwnerDID: "did:example:alice", ConnectorName: "crm", Model: "contact",
		AccountKey: "acct", SourceID: "src-1"}
	if _, err := repo.ArmWatch(ctx, repository.ArmWatchParams{WatchKey: key, DocumentID: "doc-1"}); err != nil {
		panic(err)
	}

	winners := func(_ context.Context, ids []string) (map[string]string, error) {
		return map[string]string{"doc-1": "digest-2"}, nil // read from the application's store
	}
	for item, err := range repo.IterDue(ctx, repository.DueParams{Now: clock.Now(), ReadWinners: winners}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(item.Kind == repository.DueScheduled, item.Watch.DocumentID, item.Watch.VerificationStatus)
	}
	// Output: true doc-1 pending_verification
}

// ExampleRepository_CommitSweepCheckpoint records a relist, resolves its
// candidates and commits the partition's checkpoint.
func ExampleRepository_CommitSweepCheckpoint() {
	_, repo, _, done := newExample()
	defer done()
	ctx := context.Background()
	part := repository.PartitionKey{OwnerDID: "did:example:alice", ConnectorName: "crm", Partition: "contacts"}
	rk := repository.ReceiptKey{PartitionKey: part, Provenance: "relist-1"}

	_, err := repo.RecordRelistReceipt(ctx, repository.RelistReceipt{ReceiptKey: rk, ModelID: "contact",
		SourceFetchHLC: "hlc-1", Kind: "full", Complete: true},
		[]repository.CandidateInput{{DocumentID: "doc-1", ModelID: "contact"}})
	if err != nil {
		panic(err)
	}
	_, err = repo.CommitSweepCheckpoint(ctx, rk)
	fmt.Println(err)

	ck := repository.CandidateKey{ReceiptKey: rk, DocumentID: "doc-1"}
	if _, err := repo.RecordSweepOutcome(ctx, repository.SweepOutcome{CandidateKey: ck, Outcome: models.CandidateAbsent}); err != nil {
		panic(err)
	}
	if _, err := repo.MarkSweepCandidateApplied(ctx, ck); err != nil {
		panic(err)
	}
	res, err := repo.CommitSweepCheckpoint(ctx, rk)
	if err != nil {
		panic(err)
	}
	cp, err := repo.GetSweepCheckpoint(ctx, part)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Sequence, res.Advanced, cp.Provenance)
	// Output:
	// commit sweep checkpoint did:example:alice/crm/contacts@relist-1: refused: receipt has unresolved candidates; apply or refuse each of its candidates, then commit again
	// 1 true relist-1
}

// ExampleRepository_CollectFinishedOperations deletes a finished operation
// that a newer one on the same document supersedes.
func ExampleRepository_CollectFinishedOperations() {
	_, repo, clock, done := newExample()
	defer done()
	ctx := context.Background()
	for _, id := range []string{"op-1", "op-2"} {
		_, _, err := repo.RecordOperation(ctx, repository.OperationInput{
			CallerDID: "did:example:alice", OperationID: id, NodeKey: "node", OwnerDID: "did:example:alice",
			ConnectorName: "crm", Model: "contact", Op: "update", AccountKey: "acct", Target: "contacts",
			DeterministicEventID: "evt-" + id, PayloadHash: "h-" + id, ReissueIntent: models.JSON(`{}`),
			DocumentID: models.StrPtr("doc-1"),
		})
		if err != nil {
			panic(err)
		}
		ops, err := repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		if err != nil {
			panic(err)
		}
		if _, err := repo.CommitOperation(ctx, repository.CommitParams{Fence: repository.FenceOf(&ops[0])}); err != nil {
			panic(err)
		}
		clock.Advance(time.Second)
	}

	n, err := repo.CollectFinishedOperations(ctx, repository.CollectParams{Before: clock.Now(), Limit: 100})
	if err != nil {
		panic(err)
	}
	_, err = repo.GetOperation(ctx, repository.OperationKey{CallerDID: "did:example:alice", OperationID: "op-1"})
	fmt.Println(n, errors.Is(err, repository.ErrNotFound))
	// Output: 1 true
}
