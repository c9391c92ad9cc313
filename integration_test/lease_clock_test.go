package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// skewedRepo is a second instance on e's database whose clock runs ahead.
func skewedRepo(t *testing.T, e *env, ahead time.Duration, clock repository.LeaseClock) (*repository.Repository, *repository.Repository) {
	t.Helper()
	fast := newFakeClock()
	fast.Set(e.clock.At(ahead))
	mk := func(now func() time.Time) *repository.Repository {
		r, err := repository.New(e.db, repository.Options{NowFunc: now, NewIDFunc: e.ids.Next, LeaseClock: clock})
		require.NoError(t, err)
		return r
	}
	return mk(e.clock.Now), mk(fast.Now)
}

// mkAt is the fast instance of skewedRepo alone, its clock ahead of e's.
func mkAt(t *testing.T, e *env, ahead time.Duration, clock repository.LeaseClock) *repository.Repository {
	_, fast := skewedRepo(t, e, ahead, clock)
	return fast
}

// TestLeaseClockSkew: with the application clock, an instance running an
// hour ahead re-claims a live lease (the documented assumption); with the
// database lease clock it cannot, and leases still expire by the server's
// time.
func TestLeaseClockSkew(t *testing.T) {
	t.Parallel()
	claimWith := func(t *testing.T, r *repository.Repository, lease time.Duration) []string {
		ops, err := r.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: lease})
		require.NoError(t, err)
		return ids(ops)
	}
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "app")
		a, b := skewedRepo(t, e, time.Hour, repository.AppLeaseClock)
		require.Equal(t, []string{"app"}, claimWith(t, a, time.Minute))
		stolen, err := b.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"app"}, ids(stolen), "app clock: the fast instance steals a live lease")
		_, err = b.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&stolen[0])})
		require.NoError(t, err)

		recordOp(t, e, "caller", "db")
		a, b = skewedRepo(t, e, time.Hour, repository.DatabaseLeaseClock)
		held, err := a.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"db"}, ids(held))
		require.Empty(t, claimWith(t, b, time.Minute), "database clock: skew cannot break a lease")
		hb, err := b.HeartbeatOperation(ctx(t), repository.FenceOf(&held[0]), 300*time.Millisecond)
		require.NoError(t, err, "the fast instance's holder may write: the lease is live by the server's clock")
		require.InDelta(t, time.Now().Add(300*time.Millisecond).UnixMilli(), *hb.LeaseExpiresAt, 5000,
			"lease expiry is server time, not either instance's")

		time.Sleep(400 * time.Millisecond)
		// The instances' clocks move on as the server's does: the row is due
		// again at its heartbeat's end by the application's clock (due times
		// are the application's), and free because its lease expired by the
		// server's.
		e.clock.Advance(400 * time.Millisecond)
		b = mkAt(t, e, time.Hour, repository.DatabaseLeaseClock)
		require.Equal(t, []string{"db"}, claimWith(t, b, time.Minute), "an expired lease is free by the server's clock")
		_, err = a.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&held[0])})
		require.ErrorIs(t, err, repository.ErrLeaseLost)
	})
}
