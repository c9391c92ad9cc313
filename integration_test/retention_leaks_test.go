package integrationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// docRow is an operation on document doc by caller and owner.
func docRow(id, state, caller, owner, doc string, created, updated int64) models.Operation {
	op := dbtest.OpRow(0, state, nil, created)
	op.OperationID, op.DeterministicEventID = id, "e"+id
	op.CallerDID, op.OwnerDID, op.DocumentID, op.UpdatedAt = caller, owner, &doc, updated
	return op
}

// undocRow is docRow linked to no document: a row the keep rules always
// collect.
func undocRow(id, state, caller, owner string, created, updated int64) models.Operation {
	op := docRow(id, state, caller, owner, "-", created, updated)
	op.DocumentID = nil
	return op
}

// finishAt commits operation id with updated_at at.
func finishAt(t *testing.T, db *gorm.DB, id string, at int64) {
	t.Helper()
	require.NoError(t, db.Model(&models.Operation{}).Where("operation_id = ?", id).
		Updates(map[string]any{"state": models.OperationCommitted, "updated_at": at}).Error)
}

// passWith runs one pass of repo with a far cutoff and returns its count.
func passWith(t *testing.T, e *env, repo *repository.Repository, cursor string) int64 {
	t.Helper()
	n, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10, Cursor: cursor})
	require.NoError(t, err)
	return n
}

// held reports whether finished operation id is held: stored, finished,
// among the held rows and not among the rows retention has to judge.
func held(t *testing.T, e *env, id string) bool {
	t.Helper()
	return count(t, e.db, &models.Operation{}, "operation_id = ? AND state IN ?", id,
		[]string{models.OperationCommitted, models.OperationDead}) == 1 && pendingCount(t, e, id) == 0 &&
		count(t, e.db, &models.RetentionHeld{}, "operation_id = ?", id) == 1
}

// holdWhere holds, as a pass would, the finished rows on a document that
// match cond (over columns the journal and the rows to judge share): their
// entries move to the held rows.
func holdWhere(t *testing.T, db *gorm.DB, cond string) {
	t.Helper()
	require.NoError(t, db.Exec(`INSERT INTO kubun_connector_retention_held (document_id, caller_did, operation_id,
		updated_at, owner_did, connector_name, state)
		SELECT document_id, caller_did, operation_id, updated_at, owner_did, connector_name, state FROM kubun_connector_operation
		WHERE document_id IS NOT NULL AND state IN ('committed', 'dead') AND (`+cond+`)`).Error)
	require.NoError(t, db.Exec("DELETE FROM kubun_connector_retention_pending WHERE "+cond).Error)
}

// pendingCount is how many entries operation id has among the rows
// retention has to judge.
func pendingCount(t *testing.T, e *env, id string) int {
	t.Helper()
	return int(count(t, e.db, &models.RetentionPending{}, "operation_id = ?", id))
}

func stored(t *testing.T, e *env, id string) bool {
	t.Helper()
	return count(t, e.db, &models.Operation{}, "operation_id = ?", id) == 1
}

// TestRetentionLeakLateTimestamp (leak 1): a finish whose updated_at is
// older than the pass that held the row it supersedes (a timestamp taken
// before the pass, the write committed after it) still releases the hold.
func TestRetentionLeakLateTimestamp(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{
			docRow("old", models.OperationCommitted, "c1", "o1", "d", 1, 10),
			docRow("new", models.OperationAttempted, "c1", "o1", "d", 2, 5),
		})
		require.Zero(t, passWith(t, e, e.repo, ""))
		require.True(t, held(t, e, "old"), "the newest commit is kept, and held")
		e.clock.Advance(time.Second)
		finishAt(t, e.db, "new", 5) // its timestamp long before the pass above
		require.EqualValues(t, 1, passWith(t, e, e.repo, ""))
		require.False(t, stored(t, e, "old"), "the superseded row is collected")
	})
}

// TestRetentionLeakOpenTransaction (leak 1, PostgreSQL): a finish inside a
// caller's transaction that stays open across a pass releases the hold that
// pass set, once it commits.
func TestRetentionLeakOpenTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	seedOps(t, e, []models.Operation{
		docRow("old", models.OperationCommitted, "c1", "o1", "d", 1, 10),
		docRow("new", models.OperationAttempted, "c1", "o1", "d", 2, 5),
	})
	tx := openDSN(t, e.kind, e.dsn).Begin()
	require.NoError(t, tx.Error)
	finishAt(t, tx, "new", e.clock.Millis())
	e.clock.Advance(time.Second)
	require.Zero(t, passWith(t, e, e.repo, ""))
	require.True(t, held(t, e, "old"), "the pass cannot see the open finish: it holds the row")
	require.NoError(t, tx.Commit().Error)
	e.clock.Advance(time.Second)
	require.EqualValues(t, 1, passWith(t, e, e.repo, ""))
	require.False(t, stored(t, e, "old"))
}

// TestRetentionLeakFreshCursor (leak 2): a pass under a cursor name never
// used before releases holds set by passes under another name.
func TestRetentionLeakFreshCursor(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{
			docRow("old", models.OperationCommitted, "c1", "o1", "d", 1, 10),
			docRow("new", models.OperationAttempted, "c1", "o1", "d", 2, 11),
		})
		require.Zero(t, passWith(t, e, e.repo, ""))
		require.True(t, held(t, e, "old"))
		e.clock.Advance(time.Second)
		finishAt(t, e.db, "new", e.clock.Millis())
		require.EqualValues(t, 1, passWith(t, e, e.repo, "never-used"))
		require.False(t, stored(t, e, "old"))
	})
}

// TestRetentionLeakScopedRelease (leak 3): a pass scoped to one owner
// releases a hold broken by a finish outside its scopes (the keep rules
// look across them).
func TestRetentionLeakScopedRelease(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{
			docRow("target", models.OperationCommitted, "c1", "o1", "d", 1, 10),
			docRow("by-owner", models.OperationCommitted, "c2", "o1", "d", 3, 10),
			docRow("by-caller", models.OperationAttempted, "c1", "o2", "d", 2, 10),
		})
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("o1"))
		require.NoError(t, err)
		require.Zero(t, passWith(t, e, scoped, "o1"))
		require.True(t, held(t, e, "target"), "no newer commit of its caller yet")
		e.clock.Advance(time.Second)
		finishAt(t, e.db, "by-caller", e.clock.Millis()) // owner o2: outside the scope
		require.EqualValues(t, 1, passWith(t, e, scoped, "o1"))
		require.False(t, stored(t, e, "target"))
	})
}

// TestRetentionLeakSharedDefaultCursor (leak 4): two repositories scoped to
// different owners, both on the default cursor: one's pass running between
// a finish and the other's pass does not make the other miss the finish.
func TestRetentionLeakSharedDefaultCursor(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		seedOps(t, e, []models.Operation{
			docRow("old", models.OperationCommitted, "c1", "o2", "d", 1, 10),
			docRow("new", models.OperationAttempted, "c1", "o2", "d", 2, 10),
		})
		a, err := e.repo.WithScopes(ctx(t), scopes.Owner("o1"))
		require.NoError(t, err)
		b, err := e.repo.WithScopes(ctx(t), scopes.Owner("o2"))
		require.NoError(t, err)
		require.Zero(t, passWith(t, e, b, ""))
		require.True(t, held(t, e, "old"))
		e.clock.Advance(time.Millisecond)
		finishAt(t, e.db, "new", e.clock.Millis())
		e.clock.Advance(time.Millisecond)
		require.Zero(t, passWith(t, e, a, ""))
		require.EqualValues(t, 1, passWith(t, e, b, ""))
		require.False(t, stored(t, e, "old"))
	})
}

// TestRetentionConvergence: writers record, claim and finish operations on
// a few documents for several callers and owners while retention passes run
// at the same time (scoped and unscoped, default and named cursors); then
// passes run until one deletes nothing. The stored finished rows are then
// exactly those the seed's keep rules keep over every operation that ever
// finished: nothing leaked, nothing wrongly deleted. Concurrent passes
// never fail (no deadlock between them).
func TestRetentionConvergence(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const writers, perWriter = 4, 40
		callers, owners, docs := []string{"c0", "c1", "c2"}, []string{"o0", "o1"}, []string{"d0", "d1", "d2"}
		passers := passRepos(t, e, owners)
		cursors := []string{"", "named"}

		var finished sync.Map // operation id → the row as it finished
		stop := make(chan struct{})
		var passes sync.WaitGroup
		passErrs := make(chan error, 1000)
		for i := range 3 {
			passes.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), 9))
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, err := passers[r.IntN(len(passers))].CollectFinishedOperations(context.Background(), repository.CollectParams{
						Before: e.clock.At(time.Hour), Limit: 1 + r.IntN(3), Cursor: cursors[r.IntN(len(cursors))]})
					if err != nil {
						passErrs <- err
						return
					}
				}
			})
		}
		var work sync.WaitGroup
		for w := range writers {
			work.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range perWriter {
					in := opInput(callers[r.IntN(len(callers))], fmt.Sprintf("w%d-%d", w, i))
					in.OwnerDID = owners[r.IntN(len(owners))]
					doc := docs[r.IntN(len(docs))]
					in.DocumentID = &doc
					if _, _, err := e.repo.RecordOperation(context.Background(), in); err != nil {
						passErrs <- err
						return
					}
					claimed, err := e.repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute})
					if err != nil {
						passErrs <- err
						return
					}
					for _, op := range claimed {
						var err error
						if r.IntN(4) == 0 {
							_, err = e.repo.MarkOperationDead(context.Background(), repository.FenceOf(&op))
							op.State = models.OperationDead
						} else {
							_, err = e.repo.CommitOperation(context.Background(), repository.CommitParams{Fence: repository.FenceOf(&op)})
							op.State = models.OperationCommitted
						}
						if err != nil {
							passErrs <- err
							return
						}
						finished.Store(op.OperationID, op)
					}
				}
			})
		}
		work.Wait()
		// Finish what is still attempted, then let the passes settle.
		drainAttempted(t, e, writers*perWriter, func(claimed []models.Operation) {
			for _, op := range claimed {
				_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&op)})
				require.NoError(t, err)
				op.State = models.OperationCommitted
				finished.Store(op.OperationID, op)
			}
		})
		close(stop)
		passes.Wait()
		close(passErrs)
		for err := range passErrs {
			require.NoError(t, err)
		}
		for passWith(t, e, e.repo, "") > 0 {
		}
		require.Zero(t, count(t, e.db, &models.Operation{}, "state = ?", models.OperationAttempted))

		// Every operation that ever finished, as it finished.
		var all []models.Operation
		finished.Range(func(_, v any) bool { all = append(all, v.(models.Operation)); return true })
		var want []string
		for i := range all {
			if !refCollectable(all, &all[i]) {
				want = append(want, all[i].OperationID)
			}
		}
		slices.Sort(want)
		require.Equal(t, want, remaining(t, e), "stored rows are exactly the kept ones")
		require.Len(t, all, writers*perWriter)
		require.Greater(t, len(all)-len(want), 10, "the passes collected rows")
	})
}

// TestRetentionConcurrentPasses (PostgreSQL): eight passes at a time over a
// journal whose rows are being held, released and collected, while rows
// keep finishing on the same documents, never fail (a deadlock between two
// passes' hold and release statements was possible) and leave no held row
// the keep rules would collect.
func TestRetentionConcurrentPasses(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	var rows []models.Operation
	for i := range 400 {
		doc := fmt.Sprintf("d%d", i%40)
		rows = append(rows, docRow(fmt.Sprintf("op%04d", i), []string{models.OperationCommitted, models.OperationAttempted}[i%2],
			fmt.Sprintf("c%d", i%3), fmt.Sprintf("o%d", i%2), doc, int64(i), int64(i)))
	}
	seedOps(t, e, rows)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 8 {
		wg.Go(func() {
			for range 15 {
				_, err := e.repo.CollectFinishedOperations(context.Background(), repository.CollectParams{
					Before: e.clock.At(time.Hour), Limit: 5 + g})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Go(func() {
		for i := 1; i < 400; i += 2 {
			if err := e.db.Model(&models.Operation{}).Where("operation_id = ?", fmt.Sprintf("op%04d", i)).
				Updates(map[string]any{"state": models.OperationCommitted, "updated_at": 500 + i}).Error; err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for passWith(t, e, e.repo, "") > 0 {
	}
	requireNoHeldCollectable(t, e)
	var left []models.Operation
	require.NoError(t, e.db.Find(&left).Error)
	for i := range left {
		require.False(t, refCollectable(left, &left[i]), "left behind: %s", left[i].OperationID)
	}
}
