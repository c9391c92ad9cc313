package integrationtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestFlowClaimShapesAt1M (PostgreSQL): 1,000,000 operations over 10,000
// accounts of a connector under flow control (fair, every account with a
// cap that does not bind), one row in 20 attempted (5 an account), the rest
// committed. In each shape a real journal passes through (a fresh backlog,
// due retries, everything in backoff, every due row leased, nothing
// attempted), with every account's eligible_at come (as after adoption or
// a restart: the worst case, each account looked at once more) and the
// statistics lagging (none since the million-row insert) and then fresh, a
// claim of 50 reads about the rows of the 50 accounts it serves: each
// account's rows once or twice, never the journal, and of the 10,000
// accounts' rows only the 50 it serves and a few more.
func TestFlowClaimShapesAt1M(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	now := e.clock.Millis()
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_operation SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_flow_account SET (autovacuum_enabled = false)").Error)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_flow_account (connector_name, account_key, fair, eligible_at)
		VALUES ('crm', '', true, 0)`).Error)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_flow_account (connector_name, account_key, max_in_flight, eligible_at)
		SELECT 'crm', 'a' || g, 1000, 0 FROM generate_series(0, 9999) g`).Error)
	// flow = true as the insert trigger sets it for a connector under flow
	// control (written here so the trigger's per-row wake is skipped).
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, state, attempts, version, incarnation, created_at, updated_at, flow)
		SELECT 'caller', 'op-' || g, 'n', 'owner', 'crm', 'm', 'create', 'a' || ((g / 20) % 10000), 't', 'e' || g, 'h', '{}',
			'committed', 0, 0, 'i', CAST(? AS BIGINT) - 2000000 + g, CAST(? AS BIGINT) - 2000000 + g, true
		FROM generate_series(1, 1000000) g`, now, now).Error)
	const limit = 50
	const free = ", lease_token = NULL, lease_expires_at = NULL"
	shapes := []struct {
		name, set string
		due       bool
	}{
		{"fresh backlog", "state = 'attempted', next_attempt_at = created_at" + free, true},
		{"due retries", fmt.Sprintf("state = 'attempted', attempts = 1, next_attempt_at = %d - (g %% 1000)", now-1000) + free, true},
		{"everything in backoff", fmt.Sprintf("state = 'attempted', attempts = 2, next_attempt_at = %d + g", now+3_600_000) + free, false},
		{"every due row leased", fmt.Sprintf("state = 'attempted', lease_token = 'held', lease_expires_at = %[1]d, next_attempt_at = %[1]d",
			now+600_000), false},
		{"nothing attempted", "state = 'committed', next_attempt_at = NULL" + free, false},
	}
	for _, shape := range shapes {
		for _, stats := range []string{"lagging", "fresh"} {
			// The shape (again: undoing the last claim's leases), and every
			// account to be looked at again.
			require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation o SET `+shape.set+`
				FROM (SELECT 'op-' || g AS id, g FROM generate_series(20, 1000000, 20) g) s
				WHERE o.caller_did = 'caller' AND o.operation_id = s.id`).Error, shape.name)
			require.NoError(t, e.db.Exec(`UPDATE kubun_connector_flow_account SET eligible_at = 0, tat_us = 0`).Error)
			if stats == "fresh" {
				require.NoError(t, e.db.Exec("ANALYZE kubun_connector_operation").Error)
				require.NoError(t, e.db.Exec("ANALYZE kubun_connector_flow_account").Error)
			}
			label := shape.name + ", " + stats + " statistics"
			var got int
			ops, accounts := flowReads(t, e, func(repo *repository.Repository) error {
				res, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: limit, LeaseFor: time.Minute})
				got = len(res)
				return err
			})
			want := 0
			if shape.due {
				want = limit
			}
			t.Logf("%s: claimed %d, read %d operations and %d account rows", label, got, ops, accounts)
			require.Equal(t, want, got, label)
			// Each account served has 5 attempted rows: its pick, count of
			// live leases and next due time read them at most twice.
			require.LessOrEqual(t, ops, int64(limit*2*5+2), label)
			require.LessOrEqual(t, accounts, int64(3*limit+4), label)
		}
	}
}

// flowReads runs call in a transaction and returns the rows it read of the
// journal and of the flow table (heap tuples, by scans and by indexes).
func flowReads(t *testing.T, e *env, call func(repo *repository.Repository) error) (ops, accounts int64) {
	t.Helper()
	require.NoError(t, e.db.Transaction(func(tx *gorm.DB) error {
		reads := func(table string) (int64, error) {
			var v int64
			err := tx.Raw(`SELECT COALESCE(SUM(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)), 0)
				FROM pg_stat_xact_user_tables WHERE relid = CAST(? AS regclass)`, table).Scan(&v).Error
			return v, err
		}
		o0, err := reads("kubun_connector_operation")
		if err != nil {
			return err
		}
		a0, err := reads("kubun_connector_flow_account")
		if err != nil {
			return err
		}
		if err := call(e.repo.WithTx(tx)); err != nil {
			return err
		}
		o1, err := reads("kubun_connector_operation")
		if err != nil {
			return err
		}
		a1, err := reads("kubun_connector_flow_account")
		ops, accounts = o1-o0, a1-a0
		return err
	}))
	return ops, accounts
}
