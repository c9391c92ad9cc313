package integrationtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// claimShapes are the states a real journal passes through, each applied to
// one row in 20 (50,000 of 1,000,000; the rest committed). now is the
// claim's clock.
func claimShapes(now int64) []struct {
	name, set string
	due       bool
} {
	return []struct {
		name, set string
		due       bool
	}{
		{"fresh backlog", "state = 'attempted', attempts = 0, next_attempt_at = created_at", true},
		{"due retries", fmt.Sprintf("state = 'attempted', attempts = 1, next_attempt_at = %d - (g %% 1000)", now-1000), true},
		{"recorded without a next attempt time", "state = 'attempted', attempts = 0, next_attempt_at = NULL", true},
		{"everything in backoff", fmt.Sprintf("state = 'attempted', attempts = 2, next_attempt_at = %d + g", now+3_600_000), false},
		{"run-at in the future", fmt.Sprintf("state = 'attempted', attempts = 0, next_attempt_at = %d", now+86_400_000), false},
		{"every due row leased", fmt.Sprintf("state = 'attempted', attempts = 0, lease_token = 'held', lease_expires_at = %[1]d, next_attempt_at = %[1]d",
			now+600_000), false},
		{"empty queue", "state = 'committed', next_attempt_at = NULL", false},
	}
}

// TestClaimShapesAt1M (PostgreSQL): over 1,000,000 operations, a claim of
// 50 reads about the rows it claims when 50,000 are due (fresh, retries,
// unscheduled), and about nothing when none is (backed off, run-at later,
// all leased, empty): one ordered range of the claim index, never a scan.
// Each shape is checked with the statistics of the previous shape (lagging,
// as a busy journal's do) and again after a fresh ANALYZE.
func TestClaimShapesAt1M(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, state, attempts, version, incarnation, created_at, updated_at)
		SELECT 'caller', 'op-' || g, 'n', 'owner-' || (g % 50), 'crm', 'm', 'create', 'a', 't', 'e' || g, 'h', '{}',
			'committed', 0, 0, 'i', CAST(? AS BIGINT) - 2000000 + g, CAST(? AS BIGINT) - 2000000 + g
		FROM generate_series(1, 1000000) g`, now, now).Error)
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
	repo, rec := recordingRepo(t, e)
	const limit = 50
	for _, shape := range claimShapes(now) {
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation o SET `+shape.set+`
			FROM (SELECT 'op-' || g AS id, g FROM generate_series(20, 1000000, 20) g) s
			WHERE o.caller_did = 'caller' AND o.operation_id = s.id`).Error, shape.name)
		for _, stats := range []string{"lagging", "fresh"} {
			if stats == "fresh" {
				require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
			}
			want := 0
			if shape.due {
				want = limit
			}
			for _, c := range explainClaim(t, e, repo, rec, limit) {
				require.Equal(t, want, c.claimed, "%s (%s statistics, %s plan)", shape.name, stats, c.plan)
				require.LessOrEqual(t, c.read, float64(2*want+2), "%s (%s statistics, %s plan): rows read for a claim of %d:\n%s",
					shape.name, stats, c.plan, limit, c.text)
			}
		}
	}
}

// TestClaimOfAWholeJournalBacklog (PostgreSQL): when every one of
// 100,000 operations is due (a journal recorded faster than it drains) and
// the statistics say so, claims of 50 to 3,000 still read about the rows
// they claim, in the plan made for their values and in the generic plan a
// statement cache reuses, and neither plan expects more rows than the
// claim picks. A generic plan that took the limit for a parameter expected
// a tenth of the due rows: with one limit it joined them to the journal by
// hashing all of it; with the pick's limit a parameter too, it expected
// 3,339 rows for a claim of 50 (dialect.FixedLimit). With the pick a
// subquery of the UPDATE's condition, the custom plan of a claim of 1,000
// hashed the picked keys and read the whole journal, 101,000 rows
// (store.PickedUpdate).
func TestClaimOfAWholeJournalBacklog(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	insertJournal(t, e, 100000, "'attempted'")
	require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
	repo, rec := recordingRepo(t, e)
	for _, limit := range []int{50, 100, 1000, 3000} {
		for _, c := range explainClaim(t, e, repo, rec, limit) {
			require.Equal(t, limit, c.claimed, "limit %d, %s plan", limit, c.plan)
			require.LessOrEqual(t, c.read, float64(2*limit+2), "limit %d, %s plan: rows read:\n%s", limit, c.plan, c.text)
			// The plan expects what the claim asks for: no more than its
			// pick at any limit (a limit it cannot read expects a tenth of
			// its input).
			require.LessOrEqual(t, maxLimitEstimate(c.root), float64(store.ClaimBucket(limit)),
				"limit %d, %s plan:\n%s", limit, c.plan, c.text)
		}
	}
}

// maxLimitEstimate is the most rows any Limit node of the plan expects.
func maxLimitEstimate(n planNode) float64 {
	most := 0.0
	if n.NodeType == "Limit" {
		most = n.PlanRows
	}
	for _, c := range n.Plans {
		most = max(most, maxLimitEstimate(c))
	}
	return most
}

// explainedClaim is one replay of a claim under EXPLAIN ANALYZE: the
// journal rows it read, the rows it claimed, and its plan (kind names it).
type explainedClaim struct {
	plan    string
	read    float64
	claimed int
	text    string
	root    planNode
}

// explainClaim runs one claim of limit, then replays its statement under
// EXPLAIN ANALYZE twice, each in a transaction that rolls back after the
// claim's own planner settings: with its values written in (the plan
// PostgreSQL makes for those values, as behind a pooler's simple protocol)
// and as a prepared statement executed with them (the plan a driver's
// statement cache reuses: the claim asks for a generic one, which the
// replay checks it got).
func explainClaim(t *testing.T, e *env, repo *repository.Repository, rec *sqlRecorder, limit int) []explainedClaim {
	t.Helper()
	rec.take()
	_, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: limit, LeaseFor: time.Minute})
	require.NoError(t, err)
	stmts, sent := rec.takeBoth()
	var update string
	var prepared sentStmt
	var settings []string
	for i, s := range stmts {
		switch {
		case isUpdate(s):
			update, prepared = s, sent[i]
		case strings.Contains(s, "set_config("):
			settings = append(settings, s)
		}
	}
	require.NotEmpty(t, update, "the claim's statements: %v", stmts)
	// The claim above really leased its rows: undo that, then replay it
	// under EXPLAIN ANALYZE in a transaction that rolls back.
	require.NoError(t, e.db.Exec("UPDATE kubun_connector_operation SET lease_token = NULL, lease_expires_at = NULL, next_attempt_at = created_at WHERE lease_token IS NOT NULL AND lease_token <> 'held'").Error)
	marks := make([]string, len(prepared.Vars))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	args := e.db.Dialector.Explain(strings.Join(marks, ", "), prepared.Vars...)
	var out []explainedClaim
	for _, kind := range []string{"custom", "generic"} {
		func() {
			tx := e.db.Begin()
			defer tx.Rollback()
			for _, s := range settings {
				require.NoError(t, tx.Exec(s).Error)
			}
			stmt := update
			if kind == "generic" {
				// A session's prepared statement outlives the transaction.
				require.NoError(t, tx.Exec("PREPARE claim_replay AS "+prepared.SQL).Error)
				defer tx.Exec("DEALLOCATE claim_replay")
				stmt = "EXECUTE claim_replay(" + args + ")"
			}
			var raw []string
			require.NoError(t, tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+stmt).Scan(&raw).Error)
			var plans []struct{ Plan planNode }
			require.NoError(t, json.Unmarshal([]byte(strings.Join(raw, "")), &plans))
			var text []string
			require.NoError(t, tx.Raw("EXPLAIN "+stmt).Scan(&text).Error)
			plan := strings.Join(text, "\n")
			if kind == "generic" {
				require.Contains(t, plan, "<= $", "the prepared claim's plan is generic (its due time a parameter):\n%s", plan)
			}
			out = append(out, explainedClaim{plan: kind, read: rowsRead(plans[0].Plan, "kubun_connector_operation"),
				claimed: int(plans[0].Plan.ActualRows), text: plan, root: plans[0].Plan})
		}()
	}
	return out
}

// TestClaimPlanSQLite: SQLite reads the claim from the claim index in its
// order (no sort of the due rows, no other index on state), so a claim
// stops at its limit there too.
func TestClaimPlanSQLite(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	recordOp(t, e, "caller", "a")
	repo, rec := recordingRepo(t, e)
	_, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
	require.NoError(t, err)
	update := recordedUpdate(t, rec)
	plan := strings.Join(sqlitePlan(t, e.db, update), "\n")
	require.Contains(t, plan, "kubun_connector_operation_claim_idx", plan)
	require.NotContains(t, plan, "TEMP B-TREE FOR ORDER BY", plan)
}
