package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/connstore/connstore/repository"
	"gorm.io/gorm"
)

// flowShape is one state of a journal whose every operation is due and
// under flow control, over 10,000 accounts of one fair connector: what a
// claim of 50 must cost the same in at every journal size. accounts is the
// account key of operation g (SQL); limit, run after seeding, puts most
// accounts behind their limits (@later is an hour ahead, in ms). The
// accounts a0 … a9 are always left free.
type flowShape struct {
	name, accounts string
	limit          []string
}

// freeAccounts are the accounts every shape leaves without limits.
const freeAccounts = `(SELECT 'a' || g FROM generate_series(0, 9) g)`

// flowShapes are the shapes the issue names: most accounts paused, most at
// their cap (each with one live lease), rates binding (no token for an
// hour), and one giant account among many small ones.
var flowShapes = []flowShape{
	{"most accounts paused", `'a' || (g % 10000)`, []string{
		`UPDATE kubun_connector_flow_account SET paused_until = @later, eligible_at = @later
			WHERE account_key <> '' AND account_key NOT IN ` + freeAccounts}},
	{"most accounts at their cap", `'a' || (g % 10000)`, []string{
		`UPDATE kubun_connector_flow_account SET max_in_flight = 1, eligible_at = @later
			WHERE account_key <> '' AND account_key NOT IN ` + freeAccounts,
		`UPDATE kubun_connector_operation o SET lease_token = 'held', lease_expires_at = @later, next_attempt_at = @later
			FROM (SELECT DISTINCT ON (account_key) caller_did, operation_id FROM kubun_connector_operation
				WHERE account_key NOT IN ` + freeAccounts + ` ORDER BY account_key, seq) s
			WHERE o.caller_did = s.caller_did AND o.operation_id = s.operation_id`}},
	{"rates binding", `'a' || (g % 10000)`, []string{
		`UPDATE kubun_connector_flow_account SET rate = 1, period_ms = 3600000, burst = 1, tat_us = CAST(@later AS BIGINT) * 1000,
			eligible_at = @later WHERE account_key <> '' AND account_key NOT IN ` + freeAccounts}},
	{"one giant account among many small", `CASE WHEN g % 10 <> 0 THEN 'giant' ELSE 'a' || (g % 9999) END`, nil},
}

// flowShapeRounds is how many claims of 50 each journal's shape is timed
// over (a claim costs about a millisecond: the median needs many).
const flowShapeRounds = 25

// flowShapesStep times a claim of 50 in every flow shape on a journal of
// the smallest and the largest size, interleaved, and notes each shape's
// growth against the 1.3× target.
func flowShapesStep(ctx context.Context, dsn string, sizes []int, rep *report) error {
	ends := []int{sizes[0], sizes[len(sizes)-1]}
	lines := []string{fmt.Sprintf("Flow shapes: a claim of 50 over 10,000 accounts under flow control, every operation due "+
		"(medians of %d claims, ms, %d and %d operations):", flowShapeRounds, ends[0], ends[1])}
	for _, shape := range flowShapes {
		var ms [2][]float64
		var repos [2]*repository.Repository
		var dbs [2]*gorm.DB
		for i, n := range ends {
			db, repo, _, err := store(ctx, dsn, repositoryOptions())
			if err != nil {
				return err
			}
			dbs[i], repos[i] = db, repo
			if err := seedFlowJournal(ctx, db, n, shape); err != nil {
				return fmt.Errorf("flow shape %s, %d: %w", shape.name, n, err)
			}
		}
		for range flowShapeRounds {
			for i := range ends {
				v, err := millis(func() error {
					_, err := repos[i].ClaimOperations(ctx, repository.ClaimParams{Limit: 50, LeaseFor: time.Millisecond})
					return err
				})
				if err != nil {
					return fmt.Errorf("flow shape %s: %w", shape.name, err)
				}
				ms[i] = append(ms[i], v)
			}
			time.Sleep(2 * time.Millisecond) // the 1 ms leases expire: the free accounts stay due
		}
		for i := range dbs {
			if err := dropSchema(ctx, dbs[i]); err != nil {
				return err
			}
		}
		small, large := median(ms[0]), median(ms[1])
		g := large / small
		lines = append(lines, fmt.Sprintf("- %s: %.2f → %.2f ms, %.2f× (target ≤ 1.3×: %s)", shape.name, small, large, g, met(g <= 1.3)))
	}
	rep.notes = append(rep.notes, strings.Join(lines, "\n"))
	return nil
}

// seedFlowJournal records n due operations over the shape's accounts (all
// under a fair connector, with their account rows), then applies the
// shape's limits and gathers statistics. The insert runs with triggers
// off (session_replication_role replica: the bench's role owns its
// server): the flow column is written as the insert trigger would, and
// the trigger's per-row wake is what a million one-row records would do,
// not what a claim costs.
func seedFlowJournal(ctx context.Context, db *gorm.DB, n int, shape flowShape) error {
	now := time.Now().UnixMilli()
	later := map[string]any{"later": now + 3_600_000}
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		stmts := []string{
			`SET LOCAL session_replication_role = replica`,
			fmt.Sprintf(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key, owner_did, connector_name,
				model, op, account_key, target, deterministic_event_id, payload_hash, reissue_intent, state, attempts,
				next_attempt_at, version, incarnation, created_at, updated_at, flow)
				SELECT 'caller', 'op-' || g, 'n', 'owner', 'crm', 'm', 'update', %[3]s, 't', 'e' || g, 'h', '{}',
					'attempted', 0, %[2]d - %[1]d + g, 0, 'i', %[2]d - %[1]d + g, %[2]d - %[1]d + g, true
				FROM generate_series(1, %[1]d) g`, n, now, shape.accounts),
			`SET LOCAL session_replication_role = origin`,
			`INSERT INTO kubun_connector_flow_account (connector_name, account_key, fair, eligible_at) VALUES ('crm', '', true, 0)`,
			`INSERT INTO kubun_connector_flow_account (connector_name, account_key, eligible_at)
				SELECT DISTINCT 'crm', account_key, 0 FROM kubun_connector_operation`,
		}
		for _, s := range stmts {
			if err := tx.Exec(s).Error; err != nil {
				return err
			}
		}
		for _, s := range shape.limit {
			if err := tx.Exec(s, later).Error; err != nil {
				return err
			}
		}
		return tx.Exec("ANALYZE").Error
	})
}
