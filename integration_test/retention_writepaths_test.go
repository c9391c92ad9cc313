package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// requireOnePlace: every finished row of the journal is in exactly one place: a
// pending entry recording it as it stands, or a held entry recording it.
func requireOnePlace(t *testing.T, e *env) {
	t.Helper()
	var all []models.Operation
	require.NoError(t, e.db.Find(&all).Error)
	for i := range all {
		o := all[i]
		if o.State != models.OperationCommitted && o.State != models.OperationDead {
			continue
		}
		p := count(t, e.db, &models.RetentionPending{}, "caller_did = ? AND operation_id = ? AND updated_at = ? AND owner_did = ? AND connector_name = ?",
			o.CallerDID, o.OperationID, o.UpdatedAt, o.OwnerDID, o.ConnectorName)
		h := count(t, e.db, &models.RetentionHeld{}, "document_id = ? AND caller_did = ? AND operation_id = ? AND updated_at = ? AND owner_did = ? AND connector_name = ? AND state = ?",
			o.DocumentID, o.CallerDID, o.OperationID, o.UpdatedAt, o.OwnerDID, o.ConnectorName, o.State)
		require.EqualValues(t, 1, p+h, "row %s/%s (%s): %d pending, %d held", o.CallerDID, o.OperationID, o.State, p, h)
	}
}

// TestRetentionWritePathsConverge: workers record (with replays), claim,
// batch commit, mark dead, finish reconcile-only, force-cancel, requeue
// dead rows while scoped and unscoped passes run; then passes until none
// deletes: nothing collectable stays and each finished row has exactly one
// place. On PostgreSQL a requeue and a pass deadlocked here now and then
// (40P01) before the triggers skipped entries a pass has locked.
func TestRetentionWritePathsConverge(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		callers, owners, docs := []string{"c0", "c1", "c2"}, []string{"o0", "o1"}, []string{"d0", "d1", "d2"}
		stop := make(chan struct{})
		errs := make(chan error, 1000)
		var passes, work sync.WaitGroup
		passUntilStopped(e, passRepos(t, e, owners), 2, 11, stop, errs, &passes)
		bg := context.Background()
		for w := range 3 {
			work.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 13))
				var recorded []repository.OperationInput
				var dead []repository.OperationKey
				for i := range 40 {
					in := opInput(callers[r.IntN(len(callers))], fmt.Sprintf("w%d-%d", w, i))
					in.OwnerDID = owners[r.IntN(len(owners))]
					doc := docs[r.IntN(len(docs))]
					in.DocumentID = &doc
					if _, _, err := e.repo.RecordOperation(bg, in); err != nil {
						errs <- err
						return
					}
					recorded = append(recorded, in)
					if r.IntN(3) == 0 { // replay an earlier record
						if _, _, err := e.repo.RecordOperation(bg, recorded[r.IntN(len(recorded))]); err != nil {
							errs <- fmt.Errorf("replay: %w", err)
							return
						}
					}
					if r.IntN(5) == 0 && len(dead) > 0 { // requeue a dead one
						k := dead[r.IntN(len(dead))]
						if _, err := e.repo.RequeueOperation(bg, repository.RequeueParams{OperationKey: k}); err != nil {
							var se *repository.StateError
							if !errors.As(err, &se) && !errors.Is(err, repository.ErrNotFound) {
								errs <- fmt.Errorf("requeue: %w", err)
								return
							}
						}
					}
					claimed, err := e.repo.ClaimOperations(bg, repository.ClaimParams{Limit: 4, LeaseFor: time.Minute})
					if err != nil {
						errs <- err
						return
					}
					var commits []repository.CommitParams
					for _, op := range claimed {
						k := repository.OperationKey{CallerDID: op.CallerDID, OperationID: op.OperationID}
						var err error
						switch r.IntN(6) {
						case 0:
							_, err = e.repo.MarkOperationDead(bg, repository.FenceOf(&op))
							dead = append(dead, k)
						case 1:
							_, err = e.repo.CancelOperation(bg, repository.CancelParams{OperationKey: k, Force: true})
							dead = append(dead, k)
						case 2:
							_, err = e.repo.FinishOperations(bg, []repository.Fence{repository.FenceOf(&op)}, models.OperationReconcileOnly)
						default:
							commits = append(commits, repository.CommitParams{Fence: repository.FenceOf(&op)})
						}
						if err != nil {
							var se *repository.StateError
							if !errors.As(err, &se) && !errors.Is(err, repository.ErrNotFound) {
								errs <- fmt.Errorf("finish: %w", err)
								return
							}
						}
					}
					if len(commits) > 0 {
						if _, err := e.repo.CommitOperations(bg, commits); err != nil {
							errs <- fmt.Errorf("commits: %w", err)
							return
						}
					}
				}
			})
		}
		work.Wait()
		drainAttempted(t, e, 1000, func(claimed []models.Operation) {
			var commits []repository.CommitParams
			for _, op := range claimed {
				commits = append(commits, repository.CommitParams{Fence: repository.FenceOf(&op)})
			}
			_, err := e.repo.CommitOperations(ctx(t), commits)
			require.NoError(t, err)
		})
		close(stop)
		passes.Wait()
		close(errs)
		var failed []error
		for err := range errs {
			failed = append(failed, err)
		}
		require.Empty(t, failed, "write paths and passes failed")
		e.clock.Advance(time.Second)
		drainPasses(t, e, 500)
		passWith(t, e, e.repo, "")
		var all []models.Operation
		require.NoError(t, e.db.Find(&all).Error)
		left := collectableLeft(all)
		t.Logf("%d rows stored, held %d", len(all), len(heldIDs(t, e)))
		require.Empty(t, left, "collectable rows left")
		requireOnePlace(t, e)
	})
}

// TestRetentionCountWithDuplicateEntries: with duplicate entries for one row (owner
// round trip after an unjudged release), a pass's count equals the rows it
// actually deleted and never exceeds Limit.
func TestRetentionCountWithDuplicateEntries(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		ownerRoundTrip(t, e)
		// r now collectable: newer commit of c1/o1 on d; plus collectable rows without document.
		var rows []models.Operation
		rows = append(rows, docRow("n", models.OperationCommitted, "c1", "o1", "d", 3, 5))
		for i := range 6 {
			x := undocRow(fmt.Sprintf("x%d", i), models.OperationCommitted, "cx", "ox", 1, int64(6+i))
			rows = append(rows, x)
		}
		seedOps(t, e, rows)
		e.clock.Advance(time.Second)
		for range 10 {
			var before int64
			require.NoError(t, e.db.Model(&models.Operation{}).Count(&before).Error)
			n, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 2})
			require.NoError(t, err)
			var after int64
			require.NoError(t, e.db.Model(&models.Operation{}).Count(&after).Error)
			require.Equal(t, before-after, n, "count vs deleted")
			require.LessOrEqual(t, n, int64(2))
		}
		require.False(t, stored(t, e, "r"))
		requireOnePlace(t, e)
	})
}

// TestRetentionPassInARolledBackTransaction: a pass inside a caller's transaction that rolls
// back (and a pass whose context is cancelled) leaves the queue, holds and
// entries as they were: later passes still collect what a finish supersedes.
func TestRetentionPassInARolledBackTransaction(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{docRow("r", models.OperationCommitted, "c1", "o1", "d", 1, 10)})
		require.Zero(t, passWith(t, e, e.repo, ""))
		require.True(t, held(t, e, "r"))
		seedOps(t, e, []models.Operation{docRow("s", models.OperationCommitted, "c1", "o1", "d", 2, 20)})
		boom := errors.New("boom")
		err := e.repo.Transaction(ctx(t), func(_ *gorm.DB, in *repository.Repository) error {
			n, err := in.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.True(t, stored(t, e, "r"))
		c, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = e.repo.CollectFinishedOperations(c, repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
		require.Error(t, err)
		require.EqualValues(t, 1, passWith(t, e, e.repo, ""))
		require.False(t, stored(t, e, "r"))
		requireOnePlace(t, e)
	})
}

// passRepos is a repository scoped to each of owners, then the unscoped
// one: the passes a convergence test runs side by side.
func passRepos(t *testing.T, e *env, owners []string) []*repository.Repository {
	t.Helper()
	var repos []*repository.Repository
	for _, o := range owners {
		r, err := e.repo.WithScopes(ctx(t), scopes.Owner(o))
		require.NoError(t, err)
		repos = append(repos, r)
	}
	return append(repos, e.repo)
}

// passUntilStopped starts n goroutines (in passes) that run passes through
// a repository of repos picked at random (seeded by seed), with a far
// cutoff and a limit of 1 to 3, until stop closes; a pass's error goes to
// errs and ends its goroutine.
func passUntilStopped(e *env, repos []*repository.Repository, n int, seed uint64, stop <-chan struct{}, errs chan<- error,
	passes *sync.WaitGroup) {
	for i := range n {
		passes.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), seed))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := repos[r.IntN(len(repos))].CollectFinishedOperations(context.Background(),
					repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 1 + r.IntN(3)}); err != nil {
					errs <- fmt.Errorf("pass: %w", err)
					return
				}
			}
		})
	}
}
