package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// seedBulk writes n operations in state, account a<i%3>, owner o<i%2>,
// last written at i ms.
func seedBulk(t *testing.T, e *env, n int, state string) {
	t.Helper()
	rows := make([]models.Operation, n)
	for i := range n {
		rows[i] = dbtest.OpRow(i+1, state, nil, int64(i+1))
		rows[i].AccountKey = fmt.Sprintf("a%d", i%3)
		rows[i].OwnerDID = fmt.Sprintf("o%d", i%2)
		if state == models.OperationDead {
			kind, status := "http", int64(503)
			rows[i].LastKind, rows[i].LastHTTPStatus = &kind, &status
		}
	}
	seedOps(t, e, rows)
}

// TestRequeueMatching: a filter by account, owner and time requeues
// exactly its operations (answers cleared), a dry run counts them and
// writes nothing, the cap per call holds and More/Next resume to the end,
// a scoped repository requeues only its owner's, and bad input is
// ErrInvalidInput with nothing written.
func TestRequeueMatching(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedBulk(t, e, 60, models.OperationDead)
		// a1 and o1, written before 40: i%3 == 1, i%2 == 1, i+1 < 40: i in {1, 7, 13, 19, 25, 31, 37}.
		p := repository.BulkRequeueParams{BulkParams: repository.BulkParams{AccountKey: "a1", OwnerDID: "o1",
			Before: time.UnixMilli(40), DryRun: true}, ResetAttempts: true}
		res, err := e.repo.RequeueMatching(ctx(t), p)
		require.NoError(t, err)
		require.Equal(t, 7, res.Matched)
		require.Zero(t, res.Changed)
		require.False(t, res.More)
		require.Equal(t, int64(60), count(t, e.db, &models.Operation{}, "state = ?", models.OperationDead), "a dry run writes nothing")

		p.DryRun = false
		res, err = e.repo.RequeueMatching(ctx(t), p)
		require.NoError(t, err)
		require.Equal(t, 7, res.Matched)
		require.Equal(t, 7, res.Changed)
		var requeued []models.Operation
		require.NoError(t, e.db.Where("state = ?", models.OperationAttempted).Order("operation_id").Find(&requeued).Error)
		require.Len(t, requeued, 7)
		for _, op := range requeued {
			require.Equal(t, "a1", op.AccountKey)
			require.Equal(t, "o1", op.OwnerDID)
			require.Less(t, op.CreatedAt, int64(40))
			require.Nil(t, op.LastKind, "the answer is cleared, as a single requeue does")
			require.Nil(t, op.LastHTTPStatus)
		}

		// A scoped repository requeues only its owner's.
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("o0"))
		require.NoError(t, err)
		res, err = scoped.RequeueMatching(ctx(t), repository.BulkRequeueParams{BulkParams: repository.BulkParams{AccountKey: "a2"}})
		require.NoError(t, err)
		require.Equal(t, 10, res.Matched, "i%%3 == 2 and i%%2 == 0 among 60")
		require.Zero(t, count(t, e.db, &models.Operation{}, "state = ? AND owner_did <> ?", models.OperationAttempted, "o1")-10)

		// The cap per call, and resuming to the end.
		total, calls := 0, 0
		var after *repository.ListCursor
		for {
			res, err := e.repo.RequeueMatching(ctx(t), repository.BulkRequeueParams{BulkParams: repository.BulkParams{Limit: 4, After: after}})
			require.NoError(t, err)
			require.LessOrEqual(t, res.Matched, 4)
			total += res.Changed
			calls++
			if !res.More {
				break
			}
			after = res.Next
		}
		require.Equal(t, 60-7-10, total)
		require.Equal(t, 11, calls, "43 rows at 4 a call")
		require.Zero(t, count(t, e.db, &models.Operation{}, "state = ?", models.OperationDead))

		for name, bad := range map[string]repository.BulkRequeueParams{
			"limit over the cap": {BulkParams: repository.BulkParams{Limit: repository.MaxBulk + 1}},
			"negative limit":     {BulkParams: repository.BulkParams{Limit: -1}},
			"attempted":          {BulkParams: repository.BulkParams{State: models.OperationAttempted}},
			"committed":          {BulkParams: repository.BulkParams{State: models.OperationCommitted}},
			"before the epoch":   {BulkParams: repository.BulkParams{Before: time.UnixMilli(-5)}},
			"bad account":        {BulkParams: repository.BulkParams{AccountKey: "bad\xff"}},
		} {
			_, err := e.repo.RequeueMatching(ctx(t), bad)
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
		}
		_, err = e.repo.CancelMatching(ctx(t), repository.BulkParams{State: models.OperationDead})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
	})
}

// TestCancelMatchingNeverTakesALiveLease: while a worker claims and
// commits the same operations, a bulk cancel of all of them cancels only
// rows under no live lease: every operation ends committed by its holder
// or cancelled, never both, and no holder's commit is refused (a cancel
// never lands under a live lease). A dry run counts the leased as Held.
func TestCancelMatchingNeverTakesALiveLease(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const n = 600
		seedBulk(t, e, n, models.OperationAttempted)
		held := claim(t, e, 50, time.Hour)
		res, err := e.repo.CancelMatching(ctx(t), repository.BulkParams{DryRun: true})
		require.NoError(t, err)
		require.Equal(t, n, res.Matched)
		require.Equal(t, 50, res.Held)
		for _, op := range held {
			_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&op)})
			require.NoError(t, err)
		}

		var wg sync.WaitGroup
		var committed, refused int
		wg.Go(func() {
			for {
				ops, err := e.repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 7, LeaseFor: time.Hour})
				if err != nil || len(ops) == 0 {
					return
				}
				for _, op := range ops {
					_, err := e.repo.CommitOperation(context.Background(), repository.CommitParams{Fence: repository.FenceOf(&op)})
					var lost *repository.LeaseLostError
					switch {
					case errors.As(err, &lost):
						refused++
					case err == nil:
						committed++
					default:
						t.Errorf("commit: %v", err)
					}
				}
			}
		})
		cancelled := 0
		for {
			res, err := e.repo.CancelMatching(ctx(t), repository.BulkParams{Limit: 25})
			require.NoError(t, err)
			cancelled += res.Changed
			if !res.More && res.Held == 0 {
				break
			}
		}
		wg.Wait()
		require.Zero(t, refused, "no holder lost its lease to the cancel")
		require.Equal(t, int64(committed+50), count(t, e.db, &models.Operation{}, "state = ?", models.OperationCommitted))
		require.Equal(t, int64(cancelled), count(t, e.db, &models.Operation{}, "state = ? AND last_kind = ?", models.OperationDead, repository.CancelledKind))
		require.Equal(t, n, committed+50+cancelled, "every operation once")
	})
}

// TestRequeueMatchingAt20k: 20,000 dead operations are requeued in calls
// of at most MaxBulk each, every one exactly once.
func TestRequeueMatchingAt20k(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const n = 20_000
		seedBulk(t, e, n, models.OperationDead)
		total, calls := 0, 0
		for {
			res, err := e.repo.RequeueMatching(ctx(t), repository.BulkRequeueParams{})
			require.NoError(t, err)
			require.LessOrEqual(t, res.Matched, repository.MaxBulk)
			require.Equal(t, res.Matched, res.Changed)
			total += res.Changed
			calls++
			if !res.More {
				break
			}
		}
		require.Equal(t, n, total)
		require.Equal(t, n/repository.MaxBulk, calls)
		require.Equal(t, int64(n), count(t, e.db, &models.Operation{}, "state = ?", models.OperationAttempted))
	})
}
