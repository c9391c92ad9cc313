package integrationtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// largeBatch is past every limit a per-key statement meets: PostgreSQL's
// parser depth for a row-value IN list (about 10,000 tuples) and SQLite's
// 32,766 bound parameters (16,383 two-column keys).
const largeBatch = 20_000

func manyInputs(prefix string, n int) []repository.OperationInput {
	ins := make([]repository.OperationInput, n)
	for i := range ins {
		ins[i] = opInput("caller", fmt.Sprintf("%s%05d", prefix, i))
	}
	return ins
}

// TestLargeBatches: 20,000 operations recorded in one call (and recorded
// again: every item a replay read back), claimed, committed in one call and
// committed again (every item a replay), on both databases.
func TestLargeBatches(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		ins := manyInputs("big", largeBatch)
		out, err := e.repo.RecordOperations(ctx(t), ins)
		require.NoError(t, err)
		require.Len(t, out, largeBatch)
		for i, o := range out {
			require.NoError(t, o.Err, "item %d", i)
			require.True(t, o.Created, "item %d", i)
		}
		again, err := e.repo.RecordOperations(ctx(t), ins)
		require.NoError(t, err)
		for i, o := range again {
			require.NoError(t, o.Err, "item %d", i)
			require.False(t, o.Created, "item %d", i)
		}

		ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: largeBatch, LeaseFor: time.Hour})
		require.NoError(t, err)
		require.Len(t, ops, largeBatch)
		commits := make([]repository.CommitParams, len(ops))
		for i := range ops {
			doc := "doc-" + ops[i].OperationID
			commits[i] = repository.CommitParams{Fence: repository.FenceOf(&ops[i]), DocumentID: &doc}
		}
		first, err := e.repo.CommitOperations(ctx(t), commits)
		require.NoError(t, err)
		replay, err := e.repo.CommitOperations(ctx(t), commits) // a retry after a lost reply
		require.NoError(t, err)
		for i := range commits {
			require.NoError(t, first[i].Err, "item %d", i)
			require.False(t, first[i].Write.Replay, "item %d", i)
			require.NoError(t, replay[i].Err, "item %d", i)
			require.True(t, replay[i].Write.Replay, "item %d", i)
		}
		require.Equal(t, int64(largeBatch), count(t, e.db, &models.Operation{}, "state = ?", models.OperationCommitted))
	})
}

// TestRecordOperationsFailureWritesNothing: a batch whose second INSERT
// fails leaves none of its rows behind (the first INSERT's included), so an
// error never hides rows that were written.
func TestRecordOperationsFailureWritesNothing(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		db, repo := instance(t, e, repository.Options{})
		boom := errors.New("the second insert fails")
		var inserts atomic.Int32
		require.NoError(t, db.Callback().Create().Before("gorm:create").Register("test:fail_second_insert", func(tx *gorm.DB) {
			if tx.Statement.Table == "kubun_connector_operation" && inserts.Add(1) == 2 {
				_ = tx.AddError(boom)
			}
		}))
		_, err := repo.RecordOperations(ctx(t), manyInputs("tx", 2500))
		require.ErrorIs(t, err, boom)
		require.Equal(t, int32(2), inserts.Load())
		require.Equal(t, int64(0), count(t, e.db, &models.Operation{}), "nothing written")
	})
}

// TestBatchCommitDrivenByItsRows: a 16-row batched commit with 8,000 other
// live leases finds its rows by primary key, driven from the batch's rows:
// on SQLite the plan's outer loop is the batch (not the operation table's
// state index, which read every live lease once per batch row); on
// PostgreSQL the journal rows read are the batch's own lookups.
func TestBatchCommitDrivenByItsRows(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Millis()
		far := now + time.Hour.Milliseconds()
		others := make([]models.Operation, 8000)
		for i := range others {
			others[i] = dbtest.OpRow(i, models.OperationAttempted, &now, now)
			tok := fmt.Sprintf("tok%d", i)
			others[i].LeaseToken, others[i].LeaseExpiresAt = &tok, &far
		}
		seedOps(t, e, others)
		fs := leaseMany(t, e, "c", 16, time.Hour)
		repo, rec := recordingRepo(t, e)
		commits := make([]repository.CommitParams, len(fs))
		for i := range fs {
			doc := fmt.Sprintf("doc%d", i)
			commits[i] = repository.CommitParams{Fence: fs[i], DocumentID: &doc}
		}
		_, err := repo.CommitOperations(ctx(t), commits)
		require.NoError(t, err)
		update := recordedUpdate(t, rec)
		// Replay the commit's UPDATE on fresh leases, in a transaction
		// rolled back after it is explained.
		tx := e.db.Begin()
		defer tx.Rollback()
		require.NoError(t, tx.Exec("UPDATE kubun_connector_operation SET state = 'attempted', lease_token = ended_lease_token, "+
			"lease_expires_at = ? WHERE operation_id LIKE 'c%'", far).Error)
		if e.kind == sqlitekind {
			// The journal is the inner loop, entered by primary key only.
			plan := sqlitePlan(t, tx, update)
			var journal []string
			for _, step := range plan {
				if strings.Contains(step, "kubun_connector_operation") {
					journal = append(journal, step)
				}
			}
			require.Equal(t, []string{"SEARCH kubun_connector_operation USING INDEX " +
				"sqlite_autoindex_kubun_connector_operation_1 (caller_did=? AND operation_id=?)"}, journal, "%v", plan)
			require.Equal(t, journal[0], plan[len(plan)-1], "the batch's rows drive the join: %v", plan)
			return
		}
		if e.partitioned {
			// Partitions never analyzed, 8,000 rows: the planner rightly
			// prefers reading them once to 16 lookups in each of four
			// partitions (8,016 rows read). With statistics (autovacuum
			// analyzes partitions as they grow) the batch's rows drive.
			require.NoError(t, tx.Exec("ANALYZE kubun_connector_operation").Error)
		}
		var out []string
		require.NoError(t, tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+update).Scan(&out).Error)
		var plans []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal([]byte(strings.Join(out, "")), &plans))
		require.LessOrEqual(t, rowsRead(plans[0].Plan, "kubun_connector_operation"), 32.0, "%s", strings.Join(out, ""))
	})
}

// sqlitePlan is EXPLAIN QUERY PLAN's detail lines for stmt.
func sqlitePlan(t *testing.T, db *gorm.DB, stmt string) []string {
	t.Helper()
	rows, err := db.Raw("EXPLAIN QUERY PLAN " + stmt).Rows()
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return plan
}
