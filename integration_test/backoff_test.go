package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestFailureBackoffProgression: attempts and next_attempt_at follow the
// policy, the cap holds, and the policy's "dead" ends the operation.
func TestFailureBackoffProgression(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		policy := &repository.ExponentialBackoff{Base: time.Second, Max: 5 * time.Second, MaxAttempts: 5}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Backoff: policy})
		require.NoError(t, err)
		recordOp(t, e, "caller", "op1")
		status := int64(503)
		for i, wantDelay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second} {
			ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, ops, 1, "attempt %d is due", i+1)
			op, err := repo.RecordOperationFailure(ctx(t), repository.FailureParams{
				Fence: repository.FenceOf(&ops[0]), Kind: "http", HTTPStatus: &status})
			require.NoError(t, err)
			require.Equal(t, int64(i+1), op.Attempts)
			require.Equal(t, e.clock.At(wantDelay).UnixMilli(), *op.NextAttemptAt, "attempt %d", i+1)
			require.Equal(t, "http", *op.LastKind)
			require.Equal(t, int64(503), *op.LastHTTPStatus)
			require.Nil(t, op.LeaseToken, "a failure ends the lease")
			require.Equal(t, models.OperationAttempted, op.State)

			ahead, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Empty(t, ahead, "not due before its backoff")
			e.clock.Advance(wantDelay)
		}
		ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		op, err := repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: repository.FenceOf(&ops[0]), Kind: "http"})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, op.State, "dead at MaxAttempts")
		require.Equal(t, int64(5), op.Attempts)
		require.Nil(t, op.NextAttemptAt)
		require.Nil(t, op.LastHTTPStatus)
	})
}

func TestExponentialBackoffJitterAndCap(t *testing.T) {
	t.Parallel()
	for _, r := range []float64{0, 0.5, 0.999} {
		b := &repository.ExponentialBackoff{Base: time.Second, Max: 10 * time.Second, Jitter: 0.5,
			RandFunc: func() float64 { return r }}
		for attempts := int64(1); attempts <= 70; attempts++ {
			d, dead := b.Next(attempts, "x")
			require.False(t, dead)
			base := min(time.Second<<min(attempts-1, 30), 10*time.Second)
			require.GreaterOrEqual(t, d, base/2, "attempt %d r %v", attempts, r)
			require.LessOrEqual(t, d, min(base+base/2, 10*time.Second), "attempt %d r %v", attempts, r)
		}
	}
	d, dead := repository.DefaultBackoff().Next(10, "x")
	require.True(t, dead)
	require.Zero(t, d)
}
