package integrationtest

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// Each benchmark runs the repository call and, beside it in the same run, a
// baseline: the same statements hand-written on database/sql. Compare the
// ratio, not the absolute times (see BENCHMARKS.md).

func benchKinds(b *testing.B, fn func(b *testing.B, e *env, raw *sql.DB)) {
	for _, kind := range []string{pgKind, sqlitekind} {
		b.Run(kind, func(b *testing.B) {
			e := setup(b, kind)
			raw, err := e.db.DB()
			require.NoError(b, err)
			fn(b, e, raw)
		})
	}
}

// BenchmarkUpdateSyncProgress: one CAS write (read, recompute, guarded
// UPDATE) against the two hand-written statements.
func BenchmarkUpdateSyncProgress(b *testing.B) {
	benchKinds(b, func(b *testing.B, e *env, raw *sql.DB) {
		c := context.Background()
		require.NoError(b, e.repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"}, repository.SyncStateInput{LastSyncedAt: "t", Status: "idle"}))
		recompute := counterRecompute(nil)
		b.Run("repository", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, e.repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
					Key:       repository.ConnectorKey{OwnerDID: "o", ConnectorName: "c"},
					Recompute: recompute}))
			}
		})
		sel, upd := rebind(e, `SELECT checkpoint, recovery, version, incarnation FROM kubun_connector_sync_state
			WHERE connector_name = ? AND owner_did = ?`), rebind(e, `UPDATE kubun_connector_sync_state
			SET checkpoint = ?, last_synced_at = ?, entity_count = ?, error = ?, recovery = ?, version = ?
			WHERE connector_name = ? AND owner_did = ? AND version = ? AND incarnation = ?`)
		b.Run("baseline", func(b *testing.B) {
			for b.Loop() {
				var cur repository.SyncProgressCurrent
				require.NoError(b, raw.QueryRowContext(c, sel, "c", "o").Scan(&cur.Checkpoint, &cur.Recovery, &cur.Version, &cur.Incarnation))
				res, err := recompute(c, &cur)
				require.NoError(b, err)
				r, err := raw.ExecContext(c, upd, res.Checkpoint, res.LastSyncedAt, res.EntityCount, res.Error,
					res.Recovery, cur.Version+1, "c", "o", cur.Version, cur.Incarnation)
				require.NoError(b, err)
				n, _ := r.RowsAffected()
				require.Equal(b, int64(1), n)
			}
		})
	})
}

// BenchmarkClaimOperations: lease 50 of 20,000 due operations per call.
func BenchmarkClaimOperations(b *testing.B) {
	benchKinds(b, func(b *testing.B, e *env, raw *sql.DB) {
		c := context.Background()
		rows := make([]models.Operation, 20000)
		for i := range rows {
			rows[i] = dbtest.OpRow(i, models.OperationAttempted, ptr(int64(i)), int64(i))
		}
		require.NoError(b, e.db.CreateInBatches(rows, 1000).Error)
		// Leases of 1ms expire as the clock moves 2ms per call, so every
		// call finds 50 claimable rows.
		b.Run("repository", func(b *testing.B) {
			for b.Loop() {
				e.clock.Advance(2 * time.Millisecond)
				ops, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: 50, LeaseFor: time.Millisecond})
				require.NoError(b, err)
				require.Len(b, ops, 50)
			}
		})
		lock := ""
		if e.kind == pgKind {
			lock = " FOR UPDATE SKIP LOCKED"
		}
		claim := rebind(e, `UPDATE kubun_connector_operation SET lease_token = ?, lease_expires_at = ?,
			updated_at = ?, version = version + 1 WHERE (caller_did, operation_id) IN (
			SELECT caller_did, operation_id FROM kubun_connector_operation WHERE state = 'attempted'
			AND (next_attempt_at IS NULL OR next_attempt_at <= ?) AND (lease_token IS NULL OR lease_expires_at < ?)
			ORDER BY next_attempt_at LIMIT 50`+lock+`) RETURNING *`)
		b.Run("baseline", func(b *testing.B) {
			for b.Loop() {
				e.clock.Advance(2 * time.Millisecond)
				now := e.clock.Millis()
				require.Equal(b, 50, scanAll(b, raw, claim, e.ids.Next(), now+1, now, now, now))
			}
		})
	})
}

// scanAll runs q and reads every column of every row, as a driver-level
// baseline for a RETURNING * statement; it returns the row count.
func scanAll(b *testing.B, raw *sql.DB, q string, args ...any) int {
	rows, err := raw.QueryContext(context.Background(), q, args...)
	require.NoError(b, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(b, err)
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(sql.RawBytes)
	}
	n := 0
	for rows.Next() {
		require.NoError(b, rows.Scan(vals...))
		n++
	}
	require.NoError(b, rows.Err())
	return n
}

// rebind turns ? placeholders into $n on Postgres.
func rebind(e *env, q string) string {
	if e.kind != pgKind {
		return q
	}
	out, n := []byte{}, 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			out = append(out, "$"+strconv.Itoa(n)...)
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}
