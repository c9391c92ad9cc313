package integrationtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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
			read, claimed, plan := explainClaim(t, e, repo, rec, limit)
			want := 0
			if shape.due {
				want = limit
			}
			require.Equal(t, want, claimed, "%s (%s statistics)", shape.name, stats)
			require.LessOrEqual(t, read, float64(2*want+2), "%s (%s statistics): rows read for a claim of %d:\n%s",
				shape.name, stats, limit, plan)
		}
	}
}

// explainClaim runs one claim of limit inside a transaction it rolls back,
// EXPLAIN ANALYZE on the claim's statement, and returns the journal rows
// read, the rows claimed and the plan.
func explainClaim(t *testing.T, e *env, repo *repository.Repository, rec *sqlRecorder, limit int) (float64, int, string) {
	t.Helper()
	rec.take()
	_, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: limit, LeaseFor: time.Minute})
	require.NoError(t, err)
	stmts := rec.take()
	var update string
	var settings []string
	for _, s := range stmts {
		switch {
		case strings.HasPrefix(s, "UPDATE"):
			update = s
		case strings.Contains(s, "set_config("):
			settings = append(settings, s)
		}
	}
	require.NotEmpty(t, update, "the claim's statements: %v", stmts)
	// The claim above really leased its rows: undo that, then replay it
	// under EXPLAIN ANALYZE in a transaction that rolls back.
	require.NoError(t, e.db.Exec("UPDATE kubun_connector_operation SET lease_token = NULL, lease_expires_at = NULL, next_attempt_at = created_at WHERE lease_token IS NOT NULL AND lease_token <> 'held'").Error)
	tx := e.db.Begin()
	defer tx.Rollback()
	for _, s := range settings {
		require.NoError(t, tx.Exec(s).Error)
	}
	var out []string
	require.NoError(t, tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+update).Scan(&out).Error)
	var plans []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal([]byte(strings.Join(out, "")), &plans))
	var text []string
	require.NoError(t, tx.Raw("EXPLAIN "+update).Scan(&text).Error)
	return rowsRead(plans[0].Plan, "kubun_connector_operation"), int(plans[0].Plan.ActualRows), strings.Join(text, "\n")
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
