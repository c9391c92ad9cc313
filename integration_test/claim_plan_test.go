package integrationtest

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestClaimTakesEarliestDueFirst: an attempted row with no next_attempt_at
// is due (the seed's due filter) since it was recorded; a claim takes rows
// earliest due first, a scheduled row by its next attempt time and an
// unscheduled one by its recording time, and leaves a backed-off row.
func TestClaimTakesEarliestDueFirst(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Millis()
		seedOps(t, e, []models.Operation{
			dbtest.OpRow(1, models.OperationAttempted, nil, now-20),
			dbtest.OpRow(2, models.OperationAttempted, ptr(now-5), 2),
			dbtest.OpRow(3, models.OperationAttempted, ptr(now+60000), 3), // backed off
			dbtest.OpRow(4, models.OperationAttempted, ptr(now-50), 4),
		})
		first := claim(t, e, 2, time.Minute)
		require.Equal(t, []string{"op-000001", "op-000004"}, ids(first), "due at now-20 and now-50")
		require.Equal(t, []string{"op-000002"}, ids(claim(t, e, 5, time.Minute)))
		require.Empty(t, claim(t, e, 5, time.Minute), "the backed-off row is not due")
	})
}

// TestClaimTakesTheEarliestOfItsPick: a claim of 3 picks up to 4 due rows
// (store.ClaimBucket) and takes the 3 due earliest of them, whatever their
// keys' order; the next claim takes the next 3.
func TestClaimTakesTheEarliestOfItsPick(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Millis()
		var rows []models.Operation
		for i, ago := range []int64{10, 60, 30, 50, 20, 40} {
			rows = append(rows, dbtest.OpRow(i+1, models.OperationAttempted, ptr(now-ago), int64(i+1)))
		}
		seedOps(t, e, rows)
		require.Equal(t, []string{"op-000002", "op-000004", "op-000006"}, ids(claim(t, e, 3, time.Minute)), "due 60, 50 and 40 ms ago")
		require.Equal(t, []string{"op-000001", "op-000003", "op-000005"}, ids(claim(t, e, 3, time.Minute)))
		require.Empty(t, claim(t, e, 3, time.Minute))
	})
}

// TestClaimReadsOnlyItsLimit: with 20k due rows a claim of 10 reads about 10
// rows, however the planner estimates the table (here: never analyzed, as a
// busy journal's statistics lag): no bitmap over every due row, no sort of
// all of them.
func TestClaimReadsOnlyItsLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, state, attempts, next_attempt_at, version, incarnation, created_at, updated_at)
		SELECT 'caller', 'op-' || g, 'n', 'owner', 'crm', 'm', 'create', 'a', 't', 'e' || g, 'h', '{}',
			'attempted', 0, CASE WHEN g % 10 = 0 THEN NULL ELSE g END, 0, 'i', 1, 1
		FROM generate_series(1, 20000) g`).Error)
	repo, rec := recordingRepo(t, e)
	e.clock.Set(time.UnixMilli(1_000_000))
	ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, ops, 10)
	stmts := rec.take()
	require.NotEmpty(t, stmts)

	// Replay what the claim sent in one transaction, EXPLAINing the UPDATE.
	tx := e.db.Begin()
	defer tx.Rollback()
	for _, s := range stmts[:len(stmts)-1] {
		require.NoError(t, tx.Exec(s).Error)
	}
	var out []string
	require.NoError(t, tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+stmts[len(stmts)-1]).Scan(&out).Error)
	var plans []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal([]byte(strings.Join(out, "")), &plans))
	read := rowsRead(plans[0].Plan, "kubun_connector_operation")
	require.LessOrEqual(t, read, 40.0, "rows read from the journal for a claim of 10:\n%s", strings.Join(out, ""))
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node rowsRead needs.
type planNode struct {
	NodeType       string     `json:"Node Type"`
	Relation       string     `json:"Relation Name"`
	PlanRows       float64    `json:"Plan Rows"`
	ActualRows     float64    `json:"Actual Rows"`
	ActualLoops    float64    `json:"Actual Loops"`
	RemovedByIndex float64    `json:"Rows Removed by Index Recheck"`
	RemovedByFilt  float64    `json:"Rows Removed by Filter"`
	Plans          []planNode `json:"Plans"`
}

// rowsRead sums the rows every scan of table produced or filtered away,
// except primary-key lookups (one per claimed row).
// partitionOf matches what follows a table's name in its partitions' names.
var partitionOf = regexp.MustCompile(`^_p[0-9]+$`)

func rowsRead(n planNode, table string) float64 {
	total := 0.0
	// A partition (migrations.PartitionedLayout names them table_pN) is
	// the table too: on the partitioned leg every scan is of one.
	if (n.Relation == table || partitionOf.MatchString(strings.TrimPrefix(n.Relation, table))) && n.NodeType != "ModifyTable" {
		total += (n.ActualRows + n.RemovedByFilt + n.RemovedByIndex) * max(n.ActualLoops, 1)
		if n.NodeType == "Index Scan" && n.ActualLoops > 1 {
			total = 0 // the UPDATE's lookups by key
		}
	}
	for _, c := range n.Plans {
		total += rowsRead(c, table)
	}
	return total
}

// TestPlanSettingsStayInTheCall: in the caller's transaction, the planner
// settings a claim and a retention pass change for themselves are back as
// they were for the caller's next statement.
func TestPlanSettingsStayInTheCall(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	recordOp(t, e, "caller", "p1")
	show := func(tx *gorm.DB, name string) string {
		var v string
		require.NoError(t, tx.Raw("SELECT current_setting(?)", name).Row().Scan(&v))
		return v
	}
	err := e.repo.Transaction(ctx(t), func(tx *gorm.DB, repo *repository.Repository) error {
		jit := show(tx, "jit")
		_, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, "on", show(tx, "enable_bitmapscan"))
		require.Equal(t, "auto", show(tx, "plan_cache_mode"))
		_, err = repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.Now(), Limit: 5})
		require.NoError(t, err)
		require.Equal(t, jit, show(tx, "jit"))
		return nil
	})
	require.NoError(t, err)
}
