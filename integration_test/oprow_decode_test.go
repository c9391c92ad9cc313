package integrationtest

import (
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// gormRow reads an operation with gorm's own scan, the reference the
// repository's decoder must equal.
func gormRow(t *testing.T, db *gorm.DB, caller, id string) models.Operation {
	t.Helper()
	var op models.Operation
	require.NoError(t, db.Where("caller_did = ? AND operation_id = ?", caller, id).Take(&op).Error)
	return op
}

// TestOperationRowsDecodeAsGormDoes: every path that returns operation
// rows (record, claim, commit, failure, get, both listings, the due sweep)
// returns what gorm's own scan of the stored row gives, on both databases,
// for rows with every nullable column NULL and with every one set.
func TestOperationRowsDecodeAsGormDoes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := ctx(t)
		plain := recordOp(t, e, "caller", "plain")
		full := opInput("caller", "full")
		src, doc := "src-1", "doc-1"
		full.SourceID, full.DocumentID = &src, &doc
		_, _, err := e.repo.RecordOperation(c, full)
		require.NoError(t, err)
		require.Equal(t, plain.OperationID, gormRow(t, e.db, "caller", "plain").OperationID)

		claimed, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		for _, op := range claimed {
			require.Equal(t, gormRow(t, e.db, op.CallerDID, op.OperationID), op, "claim of %s", op.OperationID)
		}
		etag := "etag-1"
		committed, err := e.repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&claimed[0]),
			ProviderEtag: &etag, ResultEntity: models.JSON(`{"id":"x","n":[1,2]}`)})
		require.NoError(t, err)
		require.Equal(t, gormRow(t, e.db, committed.CallerDID, committed.OperationID), *committed.Operation, "commit")
		status := int64(503)
		failed, err := e.repo.RecordOperationFailure(c, repository.FailureParams{Fence: repository.FenceOf(&claimed[1]),
			Kind: "http", HTTPStatus: &status})
		require.NoError(t, err)
		require.Equal(t, gormRow(t, e.db, failed.CallerDID, failed.OperationID), *failed.Operation, "failure")

		for _, id := range []string{"plain", "full"} {
			got, err := e.repo.GetOperation(c, repository.OperationKey{CallerDID: "caller", OperationID: id})
			require.NoError(t, err)
			require.Equal(t, gormRow(t, e.db, "caller", id), *got, "get %s", id)
		}
		byOwner, err := e.repo.ListOperationsByOwner(c, repository.ListOperationsParams{OwnerDID: "owner", Limit: 10})
		require.NoError(t, err)
		require.Len(t, byOwner, 2)
		for _, op := range byOwner {
			require.Equal(t, gormRow(t, e.db, op.CallerDID, op.OperationID), op, "owner listing")
		}
		byState, err := e.repo.ListOperationsByState(c, repository.ListByStateParams{State: models.OperationCommitted, Limit: 10})
		require.NoError(t, err)
		require.Len(t, byState, 1)
		require.Equal(t, gormRow(t, e.db, byState[0].CallerDID, byState[0].OperationID), byState[0], "state listing")
		e.clock.Advance(time.Hour)
		work, err := e.repo.ListDueOperations(c, repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners})
		require.NoError(t, err)
		require.Len(t, work.Operations, 1)
		require.Equal(t, gormRow(t, e.db, "caller", work.Operations[0].OperationID), work.Operations[0], "due sweep")
	})
}

// TestRepositoryStatementsRunThroughGormCallbacks: the repository's own
// statements on the journal, decoded by its own decoder, still run through
// gorm's callback chains as before, so an application's plugins see them
// as they always did: a claim, a commit and a failure as updates of
// kubun_connector_operation (with the rows they changed counted), a get and
// a listing as queries of it; the lock plugin still bumps each written
// row's version. (dbresolver's routing: TestReadReplicaRouting and
// TestWritesFollowANamedResolver; tracing spans: otelconnstore's tests.)
func TestRepositoryStatementsRunThroughGormCallbacks(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		type seen struct {
			chain, table string
			rows         int64
		}
		var mu sync.Mutex
		var got []seen
		after := func(chain string) func(*gorm.DB) {
			return func(db *gorm.DB) {
				if db.Statement.Table != "kubun_connector_operation" {
					return
				}
				mu.Lock()
				got = append(got, seen{chain, db.Statement.Table, db.RowsAffected})
				mu.Unlock()
			}
		}
		c := ctx(t)
		recordOp(t, e, "caller", "a")
		recordOp(t, e, "caller", "b")
		before := snapshot(t, e, "caller", "a").Version
		cb := e.db.Callback()
		require.NoError(t, cb.Update().After("*").Register("test:seen", after("update")))
		require.NoError(t, cb.Query().After("*").Register("test:seen", after("query")))

		claimed, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		require.Equal(t, before+1, claimed[0].Version, "the claim bumped the version")
		committed, err := e.repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&claimed[0])})
		require.NoError(t, err)
		require.Equal(t, before+2, committed.Version, "the commit bumped it again")
		_, err = e.repo.RecordOperationFailure(c, repository.FailureParams{Fence: repository.FenceOf(&claimed[1]), Kind: "net"})
		require.NoError(t, err)
		_, err = e.repo.GetOperation(c, repository.OperationKey{CallerDID: "caller", OperationID: "a"})
		require.NoError(t, err)
		_, err = e.repo.ListOperationsByOwner(c, repository.ListOperationsParams{OwnerDID: "owner", Limit: 10})
		require.NoError(t, err)

		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []seen{
			{"query", "kubun_connector_operation", 0},  // the claim's pick, built as a subquery (gorm's dry run)
			{"update", "kubun_connector_operation", 2}, // the claim
			{"update", "kubun_connector_operation", 1}, // the commit
			{"query", "kubun_connector_operation", 1},  // the failure reads the row's attempts
			{"update", "kubun_connector_operation", 1}, // the failure
			{"query", "kubun_connector_operation", 1},  // the get
			{"query", "kubun_connector_operation", 2},  // the listing
		}, got)
	})
}
