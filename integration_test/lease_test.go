package integrationtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func claim(t *testing.T, e *env, limit int, leaseFor time.Duration) []models.Operation {
	t.Helper()
	ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: limit, LeaseFor: leaseFor})
	require.NoError(t, err)
	return ops
}

func ids(ops []models.Operation) []string {
	out := make([]string, len(ops))
	for i := range ops {
		out[i] = ops[i].OperationID
	}
	return out
}

// TestClaimDueFilter: which operations a claim at now may lease.
func TestClaimDueFilter(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Now()
		past, future := ms(now.Add(-time.Second)), ms(now.Add(time.Second))
		rows := []models.Operation{
			dbtest.OpRow(1, models.OperationAttempted, nil, 1),     // never backed off: due
			dbtest.OpRow(2, models.OperationAttempted, past, 1),    // due
			dbtest.OpRow(3, models.OperationAttempted, ms(now), 1), // due exactly now
			dbtest.OpRow(4, models.OperationAttempted, future, 1),  // backed off
			dbtest.OpRow(5, models.OperationCommitted, nil, 1),
			dbtest.OpRow(6, models.OperationDead, past, 1),
			dbtest.OpRow(7, models.OperationReconcileOnly, nil, 1),
			dbtest.OpRow(8, models.OperationAttempted, nil, 1), // live lease
			dbtest.OpRow(9, models.OperationAttempted, nil, 1), // lease expired
		}
		rows[7].LeaseToken, rows[7].LeaseExpiresAt = models.StrPtr("other"), future
		rows[8].LeaseToken, rows[8].LeaseExpiresAt = models.StrPtr("other"), past
		seedOps(t, e, rows)

		got := claim(t, e, 100, time.Minute)
		require.Equal(t, []string{"op-000001", "op-000002", "op-000003", "op-000009"}, ids(got))
		for _, op := range got {
			require.Equal(t, "id-10", *op.LeaseToken, "one fresh token for the claim")
			require.Equal(t, now.Add(time.Minute).UnixMilli(), *op.LeaseExpiresAt)
			require.Equal(t, int64(1), op.Version, "claim bumps version")
			require.Equal(t, now.UnixMilli(), op.UpdatedAt)
		}
		require.Empty(t, claim(t, e, 100, time.Minute), "nothing left while leases live")

		e.clock.Advance(2 * time.Second) // op 4 comes due; op 8's lease has expired
		require.Equal(t, []string{"op-000004", "op-000008"}, ids(claim(t, e, 100, time.Minute)))
	})
}

func TestClaimLimitAndFilters(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, id := range []string{"a", "b", "c"} {
			recordOp(t, e, "caller", id)
		}
		other := opInput("caller", "z")
		other.ConnectorName = "billing"
		_, _, err := e.repo.RecordOperation(ctx(t), other)
		require.NoError(t, err)

		got, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute, ConnectorName: "billing"})
		require.NoError(t, err)
		require.Equal(t, []string{"z"}, ids(got))
		require.Len(t, claim(t, e, 2, time.Minute), 2)
		require.Len(t, claim(t, e, 2, time.Minute), 1)
	})
}

// TestNoDoubleLease: 8 workers claim repeatedly over 2,000 due operations;
// every operation is leased exactly once while its lease is live.
func TestNoDoubleLease(t *testing.T) {
	t.Parallel()
	const total, workers = 2000, 8
	forEachDB(t, func(t *testing.T, e *env) {
		rows := make([]models.Operation, total)
		for i := range rows {
			rows[i] = dbtest.OpRow(i, models.OperationAttempted, nil, int64(i))
		}
		seedOps(t, e, rows)
		var (
			mu     sync.Mutex
			leased = map[string]string{} // operation -> token
			wg     sync.WaitGroup
			errs   = make(chan error, workers)
		)
		for range workers {
			wg.Go(func() {
				for {
					ops, err := e.repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 7, LeaseFor: time.Hour})
					if err != nil {
						errs <- err
						return
					}
					if len(ops) == 0 {
						return
					}
					mu.Lock()
					for _, op := range ops {
						if prev, dup := leased[op.OperationID]; dup {
							mu.Unlock()
							errs <- &doubleLease{op.OperationID, prev, *op.LeaseToken}
							return
						}
						leased[op.OperationID] = *op.LeaseToken
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, leased, total)
		require.Equal(t, int64(total), count(t, e.db, &models.Operation{}, "lease_token IS NOT NULL AND version = 1"))
	})
}

type doubleLease struct{ op, first, second string }

func (d *doubleLease) Error() string {
	return "operation " + d.op + " leased twice: " + d.first + " and " + d.second
}

// TestFencing: after a lease expires and another worker claims, every write
// of the first worker fails with ErrLeaseLost and leaves the row unchanged.
func TestFencing(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "op1")
		first := claim(t, e, 1, 10*time.Second)
		require.Len(t, first, 1)
		stale := repository.FenceOf(&first[0])

		// Before expiry the holder may heartbeat.
		e.clock.Advance(5 * time.Second)
		hb, err := e.repo.HeartbeatOperation(ctx(t), stale, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, e.clock.At(10*time.Second).UnixMilli(), *hb.LeaseExpiresAt)

		e.clock.Advance(11 * time.Second) // expired: another worker claims
		second := claim(t, e, 1, time.Minute)
		require.Len(t, second, 1)
		require.NotEqual(t, stale.LeaseToken, *second[0].LeaseToken)
		before := snapshot(t, e, "caller", "op1")

		doc := models.StrPtr("doc")
		writes := map[string]func() error{
			"commit": func() error {
				_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: stale, DocumentID: doc})
				return err
			},
			"failure": func() error {
				_, err := e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: stale, Kind: "timeout"})
				return err
			},
			"heartbeat": func() error { _, err := e.repo.HeartbeatOperation(ctx(t), stale, time.Hour); return err },
			"release":   func() error { _, err := e.repo.ReleaseOperation(ctx(t), stale); return err },
			"dead":      func() error { _, err := e.repo.MarkOperationDead(ctx(t), stale); return err },
			"reconcile": func() error { _, err := e.repo.MarkOperationReconcileOnly(ctx(t), stale); return err },
		}
		for name, write := range writes {
			require.ErrorIs(t, write(), repository.ErrLeaseLost, name)
			require.Equal(t, before, snapshot(t, e, "caller", "op1"), name)
		}

		// The new holder commits; afterwards even its own token is spent.
		fresh := repository.FenceOf(&second[0])
		done, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: fresh, DocumentID: doc,
			ProviderEtag: models.StrPtr("etag"), ResultEntity: models.JSON(`{"id":1}`)})
		require.NoError(t, err)
		require.Equal(t, models.OperationCommitted, done.State)
		require.Nil(t, done.LeaseToken)
		require.Nil(t, done.LeaseExpiresAt)
		require.Equal(t, "doc", *done.DocumentID)
		require.JSONEq(t, `{"id":1}`, done.ResultEntity.String())
		_, err = e.repo.ReleaseOperation(ctx(t), fresh)
		require.ErrorIs(t, err, repository.ErrLeaseLost)

		_, err = e.repo.ReleaseOperation(ctx(t), repository.Fence{CallerDID: "caller", OperationID: "nope", LeaseToken: "x"})
		require.ErrorIs(t, err, repository.ErrNotFound)
	})
}

func TestTerminalTransitions(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			id    string
			state string
			call  func(repository.Fence) (*repository.FencedWrite, error)
		}{
			{"d", models.OperationDead, func(f repository.Fence) (*repository.FencedWrite, error) { return e.repo.MarkOperationDead(ctx(t), f) }},
			{"r", models.OperationReconcileOnly, func(f repository.Fence) (*repository.FencedWrite, error) {
				return e.repo.MarkOperationReconcileOnly(ctx(t), f)
			}},
			{"x", models.OperationAttempted, func(f repository.Fence) (*repository.FencedWrite, error) { return e.repo.ReleaseOperation(ctx(t), f) }},
		} {
			recordOp(t, e, "caller", tc.id)
			got, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, got, 1)
			op, err := tc.call(repository.FenceOf(&got[0]))
			require.NoError(t, err)
			require.Equal(t, tc.state, op.State)
			require.Nil(t, op.LeaseToken)
			require.Equal(t, int64(2), op.Version, "claim and transition each bump version")
		}
		require.Equal(t, []string{"x"}, ids(claim(t, e, 10, time.Minute)), "released operation is claimable again")
	})
}

func TestClaimOldestDueFirst(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Millis()
		seedOps(t, e, []models.Operation{
			dbtest.OpRow(1, models.OperationAttempted, ptr(now-10), 1),
			dbtest.OpRow(2, models.OperationAttempted, ptr(now-30), 2),
			dbtest.OpRow(3, models.OperationAttempted, ptr(now-20), 3),
		})
		recordOp(t, e, "caller", "fresh") // due now: after every backed-off row
		var order []string
		for range 4 {
			order = append(order, ids(claim(t, e, 1, time.Minute))...)
		}
		require.Equal(t, []string{"op-000002", "op-000003", "op-000001", "fresh"}, order)
	})
}
