package integrationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// releaseUnjudged holds r (c1, o1, d, updated 10), then finishes s
// (c2, o2, d: does not supersede r) and runs a pass scoped to owner o2: it
// releases r (its entry placed at the pass's now, ord != updated_at) but its
// window does not judge r.
func releaseUnjudged(t *testing.T, e *env) *repository.Repository {
	t.Helper()
	seedOps(t, e, []models.Operation{docRow("r", models.OperationCommitted, "c1", "o1", "d", 1, 10)})
	require.Zero(t, passWith(t, e, e.repo, ""))
	require.True(t, held(t, e, "r"))
	seedOps(t, e, []models.Operation{docRow("s", models.OperationCommitted, "c2", "o2", "d", 2, 20)})
	e.clock.Advance(time.Second)
	o2, err := e.repo.WithScopes(ctx(t), scopes.Owner("o2"))
	require.NoError(t, err)
	require.Zero(t, passWith(t, e, o2, ""))
	var entries []models.RetentionPending
	require.NoError(t, e.db.Where("operation_id = 'r'").Find(&entries).Error)
	require.Len(t, entries, 1)
	require.NotEqual(t, entries[0].UpdatedAt, entries[0].Ord, "released at the pass's now")
	return o2
}

// TestRetentionDuplicateEntriesAfterADocumentMove: r's released entry (ord
// = the releasing pass's now) is not judged by the scoped pass; then r
// moves to another document (a change the triggers handle: heldChange).
// The trigger's delete probes ord = updated_at and misses the released
// entry; its insert adds one at updated_at. Both entries record r as it
// stands, so the next unscoped pass judges r twice in one window. Its hold
// (INSERT ... ON CONFLICT DO UPDATE) met the same key twice and failed on
// PostgreSQL, every pass, for as long as both stayed in the window: the
// hold now takes each row once.
func TestRetentionDuplicateEntriesAfterADocumentMove(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		releaseUnjudged(t, e)
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET document_id = 'd2' WHERE operation_id = 'r'`).Error)
		var entries []models.RetentionPending
		require.NoError(t, e.db.Where("operation_id = 'r'").Order("ord").Find(&entries).Error)
		t.Logf("r's entries: %+v", entries)
		requirePassesHoldR(t, e)
	})
}

// TestRetentionDuplicateEntriesAfterAnOwnerRoundTrip: the same with only owner changes
// (o1 -> o9 -> o1, same updated_at).
func TestRetentionDuplicateEntriesAfterAnOwnerRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		ownerRoundTrip(t, e)
		requirePassesHoldR(t, e)
	})
}

// ownerRoundTrip gives r two entries recording it as it stands: released
// by a pass that does not judge it (releaseUnjudged), its owner then goes
// to o9 and back, at the same updated_at.
func ownerRoundTrip(t *testing.T, e *env) {
	t.Helper()
	releaseUnjudged(t, e)
	require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o9' WHERE operation_id = 'r'`).Error)
	require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o1' WHERE operation_id = 'r'`).Error)
}

// requirePassesHoldR runs three passes, none of which may fail, after
// which r (kept) is held.
func requirePassesHoldR(t *testing.T, e *env) {
	t.Helper()
	e.clock.Advance(time.Second)
	for i := range 3 {
		_, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
		require.NoError(t, err, "pass %d", i)
	}
	require.True(t, held(t, e, "r"))
}

// TestRetentionHeldRollbackKeepsTheCurrentEntry: r gets two entries with
// its updated_at: a stale one (released at X1, recording owner o1) and,
// after an owner change, a hold and a second release, a current one at X2
// > X1 (owner o2). Rolling 0018 back keeps one entry per row version; when
// it kept the lowest ord, the stale one, r (collectable: superseded for
// its caller and its new owner) went to neither table after the re-up and
// was never collected. The rollback now drops stale entries first.
func TestRetentionHeldRollbackKeepsTheCurrentEntry(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		o2 := releaseUnjudged(t, e) // r: entry at X1, owner o1
		// r moves to owner o2 (same updated_at): a trigger entry at 10.
		require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o2' WHERE operation_id = 'r'`).Error)
		// A pass scoped to o2 judges r (kept: newest commit of c1) and holds it;
		// the stale X1 entry (owner o1) is outside its scope and stays.
		o9, err := e.repo.WithScopes(ctx(t), scopes.Owner("o9"))
		require.NoError(t, err)
		e.clock.Advance(time.Second)
		require.Zero(t, passWith(t, e, o2, ""))
		require.Equal(t, 1, pendingCount(t, e, "r"), "the stale X1 entry")
		require.EqualValues(t, 1, count(t, e.db, &models.RetentionHeld{}, "operation_id = 'r'"))
		// Newer commits of r's caller (c1) and of its owner (o2) on d: r is
		// now collectable; the finish queues d.
		e.clock.Advance(time.Second)
		seedOps(t, e, []models.Operation{docRow("n", models.OperationCommitted, "c1", "o2", "d", 3, 30)})
		e.clock.Advance(time.Second)
		// A pass scoped to an owner with no rows releases r at X2 > X1.
		require.Zero(t, passWith(t, e, o9, ""))
		var entries []models.RetentionPending
		require.NoError(t, e.db.Where("operation_id = 'r'").Order("ord").Find(&entries).Error)
		t.Logf("r's entries before rollback: %+v", entries)
		require.Len(t, entries, 2)

		c := context.Background()
		rollbackThrough(t, e.db, mig0018)
		require.NoError(t, migrations.Migrate(c, e.db))
		entries = nil
		require.NoError(t, e.db.Where("operation_id = 'r'").Order("ord").Find(&entries).Error)
		t.Logf("r's entries after rollback and re-up: %+v; held: %d", entries,
			count(t, e.db, &models.RetentionHeld{}, "operation_id = 'r'"))
		e.clock.Advance(time.Second)
		for range 5 {
			passWith(t, e, e.repo, "")
		}
		require.False(t, stored(t, e, "r"), "r, collectable, is in neither table (leak)")
	})
}

// TestRetentionRandomOwnerChangesConverge: a sequential random walk of
// finishes, raw owner/connector changes of finished rows, scoped and
// unscoped passes with cutoffs that move back and forth; then unscoped passes
// with a far cutoff until one deletes nothing. The journal must then hold
// exactly what the keep rules keep, and every finished row must have one
// place (a matching entry or a matching held entry).
func TestRetentionRandomOwnerChangesConverge(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for seed := range uint64(6) {
			ownerChangeWalk(t, e, seed)
		}
	})
}

func ownerChangeWalk(t *testing.T, e *env, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 42))
	callers, owners, docs := []string{"c0", "c1"}, []string{"o0", "o1", "o2"}, []string{"d0", "d1"}
	var repos []*repository.Repository
	for _, o := range owners {
		s, err := e.repo.WithScopes(ctx(t), scopes.Owner(o))
		require.NoError(t, err)
		repos = append(repos, s)
	}
	repos = append(repos, e.repo)
	n := 0
	for step := range 150 {
		e.clock.Advance(time.Duration(1+r.IntN(5)) * time.Millisecond)
		switch k := r.IntN(10); {
		case k < 4:
			n++
			st := models.OperationCommitted
			if r.IntN(4) == 0 {
				st = models.OperationDead
			}
			seedOps(t, e, []models.Operation{docRow(fmt.Sprintf("s%d-%03d", seed, n), st, callers[r.IntN(2)], owners[r.IntN(3)],
				docs[r.IntN(2)], e.clock.Millis(), e.clock.Millis())})
		case k < 6 && n > 0:
			id := fmt.Sprintf("s%d-%03d", seed, 1+r.IntN(n))
			col := []string{"owner_did", "owner_did", "document_id"}[r.IntN(3)]
			val := owners[r.IntN(3)]
			if col == "document_id" {
				val = docs[r.IntN(2)]
			}
			require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET `+col+` = ? WHERE operation_id = ?`, val, id).Error)
		default:
			before := e.clock.Now().Add(time.Duration(r.IntN(40)-30) * time.Millisecond)
			_, err := repos[r.IntN(len(repos))].CollectFinishedOperations(ctx(t), repository.CollectParams{Before: before, Limit: 1 + r.IntN(2)})
			require.NoError(t, err, "seed %d step %d", seed, step)
		}
	}
	e.clock.Advance(time.Second)
	drainPasses(t, e, 200)
	for range 3 {
		passWith(t, e, e.repo, "")
	}
	var all []models.Operation
	require.NoError(t, e.db.Where("operation_id LIKE ?", fmt.Sprintf("s%d-%%", seed)).Find(&all).Error)
	for i := range all {
		require.False(t, refCollectable(all, &all[i]), "seed %d: left collectable: %+v", seed, all[i])
	}
}

// TestRetentionConcurrentOwnerChangesConverge (PostgreSQL): writers insert
// finished rows and move finished rows between owners and documents while
// scoped and unscoped passes run; then passes until one deletes nothing:
// no row the keep rules collect is left.
func TestRetentionConcurrentOwnerChangesConverge(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		owners, docs := []string{"o0", "o1", "o2"}, []string{"d0", "d1", "d2"}
		stop := make(chan struct{})
		errs := make(chan error, 100)
		var passes, writers sync.WaitGroup
		passUntilStopped(e, passRepos(t, e, owners), 3, 3, stop, errs, &passes)
		db := openDSN(t, e.kind, e.dsn)
		for w := range 3 {
			writers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 5))
				for i := range 400 {
					at := e.clock.Millis() - 100000 + int64(i*10+w)
					var err error
					if r.IntN(2) == 0 || i < 10 {
						st := models.OperationCommitted
						if r.IntN(4) == 0 {
							st = models.OperationDead
						}
						err = db.Create(&[]models.Operation{docRow(fmt.Sprintf("w%d-%03d", w, i), st, fmt.Sprintf("c%d", r.IntN(2)),
							owners[r.IntN(3)], docs[r.IntN(3)], at, at)}).Error
					} else {
						col, val := "owner_did", owners[r.IntN(3)]
						if r.IntN(3) == 0 {
							col, val = "document_id", docs[r.IntN(3)]
						}
						err = db.Exec(`UPDATE kubun_connector_operation SET `+col+` = ? WHERE operation_id = ?`,
							val, fmt.Sprintf("w%d-%03d", w, r.IntN(i))).Error
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		writers.Wait()
		close(stop)
		passes.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		drainPasses(t, e, 500)
		passWith(t, e, e.repo, "")
		var all []models.Operation
		require.NoError(t, e.db.Find(&all).Error)
		require.Empty(t, collectableLeft(all), "collectable rows left")
	})
}
