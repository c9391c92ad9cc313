package integrationtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestRetentionHotDocumentDoesNotStarvePasses: a document with more kept
// rows than one pass's window (Budget × Limit) keeps getting finishes.
// Every finish queues the document and every pass releases its held rows;
// released at their old updated_at, at the head of the pass order, they
// filled every window again, were held again, and nothing behind them was
// ever judged: the superseded rows of the hot document and every
// collectable row of other documents stayed, however many passes ran. They
// now queue behind the rows waiting (the pass order's place, ord).
func TestRetentionHotDocumentDoesNotStarvePasses(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const limit = 2
		window := repository.CollectBudget * limit
		var rows []models.Operation
		// window+1 collaborators, each with one commit on "hot": each is
		// the newest commit of its caller, so the keep rules keep it.
		for i := range window + 1 {
			rows = append(rows, docRow(fmt.Sprintf("hot%02d", i), models.OperationCommitted,
				fmt.Sprintf("h%02d", i), "oh", "hot", int64(i), int64(1+i)))
		}
		// Another document: cold00..cold08 are superseded by cold09.
		for i := range 10 {
			rows = append(rows, docRow(fmt.Sprintf("cold%02d", i), models.OperationCommitted,
				"cc", "oc", "cold", int64(100+i), int64(100+i)))
		}
		// A row without a document: always collectable.
		nodoc := docRow("nodoc", models.OperationCommitted, "cz", "oz", "x", 200, 200)
		nodoc.DocumentID = nil
		rows = append(rows, nodoc)
		seedOps(t, e, rows)

		before := e.clock.At(24 * time.Hour)
		pass := func() int64 {
			n, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: before, Limit: limit})
			require.NoError(t, err)
			return n
		}
		pass()
		// Caller h00 keeps committing on the hot document, one commit
		// between passes (each supersedes its previous one).
		for k := range 30 {
			e.clock.Advance(time.Second)
			seedOps(t, e, []models.Operation{docRow(fmt.Sprintf("n%02d", k), models.OperationCommitted,
				"h00", "oh", "hot", int64(1000+k), e.clock.Millis())})
			pass()
		}
		var all []models.Operation
		require.NoError(t, e.db.Find(&all).Error)
		var collectable []string
		for i := range all {
			if refCollectable(all, &all[i]) {
				collectable = append(collectable, all[i].OperationID)
			}
		}
		t.Logf("after 31 passes of limit %d: %d rows stored, collectable by the keep rules but stored: %v",
			limit, len(all), collectable)
		require.False(t, stored(t, e, "nodoc"),
			"a row without a document, collectable since the first pass, is never reached")
		require.False(t, stored(t, e, "cold00"),
			"a superseded row of another document, collectable since the first pass, is never reached")
		require.LessOrEqual(t, len(collectable), 2*limit, "collectable rows pile up")
	})
}

// TestRetentionOwnerChangeRacingHold (PostgreSQL, READ COMMITTED): a pass
// judges r (kept: the newest commit of owner oX on d) and inserts its held
// entry; before the pass's settling statement, a writer changes r's owner
// to oY (same updated_at) and commits: the trigger re-enters r among the
// rows to judge (its held entry is not visible to it yet). When the
// settling statement's held probe compared document, key and updated_at
// but not the owner (nor the connector) the hold judged, it took r's new
// entry for held and deleted it: r, collectable (s, a newer commit of its
// caller and of its new owner, supersedes it), stayed held under its old
// judgement, with no finish queued to release it.
//
// The interleaving is forced by a transaction holding an uncommitted held
// entry with r's key: the pass's hold INSERT waits on it (after taking its
// snapshot) while the writer commits.
func TestRetentionOwnerChangeRacingHold(t *testing.T) {
	t.Parallel()
	for _, col := range []string{"owner_did"} {
		t.Run(col, func(t *testing.T) {
			e := setup(t, pgKind)
			seedOps(t, e, []models.Operation{
				docRow("r", models.OperationCommitted, "c1", "oX", "d", 1, 10),
				docRow("s", models.OperationCommitted, "c1", "oY", "d", 2, 11),
			})
			blocker, done := passWaitingToHold(t, e) // the hold INSERT waits on r's key
			// The writer: r moves to owner oY, same updated_at, committed.
			require.NoError(t, e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'oY'
				WHERE operation_id = 'r'`).Error)
			require.Equal(t, 1, pendingCount(t, e, "r"), "the trigger re-entered r among the rows to judge")
			require.NoError(t, blocker.Rollback().Error)
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("pass did not finish")
			}
			// r is now superseded for its caller (s) and its new owner (s).
			var all []models.Operation
			require.NoError(t, e.db.Find(&all).Error)
			for i := range all {
				if all[i].OperationID == "r" {
					require.True(t, refCollectable(all, &all[i]), "r is collectable by the keep rules")
				}
			}
			for range 3 {
				e.clock.Advance(time.Second)
				passWith(t, e, e.repo, "")
			}
			var h models.RetentionHeld
			require.NoError(t, e.db.Where("operation_id = 'r'").Find(&h).Error)
			t.Logf("r's held entry: %+v; pending entries of r: %d", h, pendingCount(t, e, "r"))
			require.False(t, stored(t, e, "r"), "r, collectable, is left held forever (leak)")
		})
	}
}

// TestRetentionRequeueRacingHoldSameMillis (PostgreSQL): the same
// interleaving, but the writer requeues the dead row the pass is holding
// and finishes it again, all in the same millisecond (the held entry's
// updated_at matches the row again). The finish queues the document, so
// the next pass releases it: no leak.
func TestRetentionRequeueRacingHoldSameMillis(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	seedOps(t, e, []models.Operation{
		docRow("r", models.OperationDead, "c1", "o1", "d", 1, e.clock.Millis()),
	})
	blocker, done := passWaitingToHold(t, e)
	_, err := e.repo.RequeueOperation(ctx(t), repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: "c1", OperationID: "r"}})
	require.NoError(t, err)
	claimed, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: repository.FenceOf(&claimed[0])})
	require.NoError(t, err)
	require.NoError(t, blocker.Rollback().Error)
	require.NoError(t, <-done)
	// A newer commit of the same caller and owner supersedes r.
	seedOps(t, e, []models.Operation{docRow("s", models.OperationCommitted, "c1", "o1", "d", 2, e.clock.Millis())})
	e.clock.Advance(time.Second)
	for range 3 {
		passWith(t, e, e.repo, "")
	}
	require.False(t, stored(t, e, "r"))
	requireNoHeldCollectable(t, e)
}

// TestRetentionHeldUpgradeRoundTrip: 0018 up, rollback, up with held rows,
// unheld rows, a queued finish and a finish between rollback and re-up:
// passes then converge to exactly the keep rules, and every finished row
// is in exactly one of the two tables.
func TestRetentionHeldUpgradeRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c := context.Background()
		var rows []models.Operation
		for i := range 40 {
			st := []string{models.OperationCommitted, models.OperationDead, models.OperationAttempted}[i%3]
			rows = append(rows, docRow(fmt.Sprintf("op%02d", i), st, fmt.Sprintf("c%d", i%3),
				fmt.Sprintf("o%d", i%2), fmt.Sprintf("d%d", i%4), int64(i), int64(i+1)))
		}
		seedOps(t, e, rows)
		for passWith(t, e, e.repo, "") > 0 {
		}
		require.NotEmpty(t, heldIDs(t, e))
		rollbackThrough(t, e.db, mig0018)
		e.clock.Advance(time.Second)
		finishAt(t, e.db, "op02", e.clock.Millis())
		finishAt(t, e.db, "op05", e.clock.Millis())
		require.NoError(t, migrations.Migrate(c, e.db))
		rollbackThrough(t, e.db, mig0018)
		require.NoError(t, migrations.Migrate(c, e.db))
		e.clock.Advance(time.Second)
		for i := 8; i < 40; i += 3 {
			finishAt(t, e.db, fmt.Sprintf("op%02d", i), e.clock.Millis())
		}
		for range 20 {
			passWith(t, e, e.repo, "")
		}
		requireNoHeldCollectable(t, e)
		var all []models.Operation
		require.NoError(t, e.db.Find(&all).Error)
		for i := range all {
			require.False(t, refCollectable(all, &all[i]), "left: %s", all[i].OperationID)
		}
		// Every finished row is in exactly one of the two tables.
		for i := range all {
			if all[i].State != models.OperationCommitted && all[i].State != models.OperationDead {
				continue
			}
			id := all[i].OperationID
			inHeld := count(t, e.db, &models.RetentionHeld{}, "operation_id = ? AND updated_at = ?", id, all[i].UpdatedAt)
			require.EqualValues(t, 1, int64(pendingCount(t, e, id))+inHeld, "entries of %s", id)
		}
	})
}

// TestRetentionActiveDocumentsDoNotStarvePasses: the same starvation with
// one kept row per document. More than Budget × Limit documents each have
// an old kept row (their creator's commit) and get a new commit between
// passes. When each pass released every one of those old rows back to the
// head of the pass order, it judged the first Budget × Limit of them, kept
// and held them again, and never reached the superseded commits behind
// them: 21 passes deleted nothing of 171 collectable rows.
func TestRetentionActiveDocumentsDoNotStarvePasses(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const limit = 2
		docs := repository.CollectBudget*limit + 1
		var rows []models.Operation
		for k := range docs {
			rows = append(rows, docRow(fmt.Sprintf("a%02d", k), models.OperationCommitted,
				fmt.Sprintf("creator%02d", k), "o", fmt.Sprintf("d%02d", k), int64(k), int64(1+k)))
		}
		seedOps(t, e, rows)
		before := e.clock.At(24 * time.Hour)
		var deleted int64
		pass := func() {
			n, err := e.repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: before, Limit: limit})
			require.NoError(t, err)
			deleted += n
		}
		pass()
		for r := range 20 {
			e.clock.Advance(time.Second)
			var round []models.Operation
			for k := range docs {
				round = append(round, docRow(fmt.Sprintf("b%02d-%02d", k, r), models.OperationCommitted,
					"editor", "o", fmt.Sprintf("d%02d", k), int64(1000+r), e.clock.Millis()))
			}
			seedOps(t, e, round)
			pass()
		}
		var all []models.Operation
		require.NoError(t, e.db.Find(&all).Error)
		collectable := 0
		for i := range all {
			if refCollectable(all, &all[i]) {
				collectable++
			}
		}
		t.Logf("21 passes of limit %d deleted %d rows; %d rows stored, %d of them collectable", limit, deleted, len(all), collectable)
		require.Positive(t, deleted, "passes delete nothing while %d rows are collectable", collectable)
	})
}

// TestRetentionReleaseRacingOwnerChange (PostgreSQL): a pass's release
// puts r's held entry back among the rows to judge (uncommitted; the
// cutoff places it at r's updated_at) and r is outside that pass's window.
// A writer changes r's owner, same updated_at: its trigger's delete of r's
// entry does not see the release's uncommitted entry, its delete of r's
// held entry waits for the pass, and its insert of r's new entry meets the
// release's (now committed) entry in the same place. When that insert did
// nothing, r's only entry recorded the old owner, the next pass dropped it
// as stale, and r was in neither table: never collected. The trigger's
// entry now takes the row as it stands.
func TestRetentionReleaseRacingOwnerChange(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	x := undocRow("x", models.OperationCommitted, "cx", "ox", 1, 5) // no document: collectable
	seedOps(t, e, []models.Operation{docRow("r", models.OperationCommitted, "c1", "o1", "d", 1, 10)})
	require.Zero(t, passWith(t, e, e.repo, ""))
	require.True(t, held(t, e, "r"))
	// A commit of another caller and owner on d (it does not supersede r)
	// queues d; x is a collectable row the next pass will wait on.
	seedOps(t, e, []models.Operation{docRow("s", models.OperationCommitted, "c2", "o2", "d", 2, 20), x})

	blocker, blockerPID := lockHolder(t, e.db)
	require.NoError(t, blocker.Exec(`SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'x' FOR UPDATE`).Error)
	done := make(chan error, 1)
	go func() { // cutoff 8: r (updated_at 10) is outside this pass's window
		_, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: time.UnixMilli(8), Limit: 10})
		done <- err
	}()
	passPID := waitBlockedBy(t, e.db, blockerPID) // released d, now deleting x
	wrote := make(chan error, 1)
	go func() {
		wrote <- e.db.Exec(`UPDATE kubun_connector_operation SET owner_did = 'o2' WHERE operation_id = 'r'`).Error
	}()
	waitBlockedBy(t, e.db, passPID) // the writer's trigger waits on the pass
	require.NoError(t, blocker.Rollback().Error)
	require.NoError(t, <-done)
	require.NoError(t, <-wrote)

	var entries []models.RetentionPending
	require.NoError(t, e.db.Where("operation_id = 'r'").Find(&entries).Error)
	t.Logf("r's entries to judge: %+v; held entries: %d", entries,
		count(t, e.db, &models.RetentionHeld{}, "operation_id = 'r'"))
	// A newer commit of r's caller and of its (new) owner supersedes it.
	e.clock.Advance(time.Second)
	seedOps(t, e, []models.Operation{docRow("r2", models.OperationCommitted, "c1", "o2", "d", 3, 30)})
	for range 3 {
		passWith(t, e, e.repo, "")
	}
	require.False(t, stored(t, e, "r"), "r, collectable, is never judged again (leak)")
}

// passWaitingToHold starts a pass that waits, in its hold, on a held entry
// for r on d another transaction (blocker) has inserted and not committed;
// done reports the pass's end once blocker rolls back.
func passWaitingToHold(t *testing.T, e *env) (blocker *gorm.DB, done chan error) {
	t.Helper()
	blocker, blockerPID := lockHolder(t, e.db)
	require.NoError(t, blocker.Exec(`INSERT INTO kubun_connector_retention_held
		(document_id, caller_did, operation_id, updated_at, owner_did, connector_name, state)
		VALUES ('d', 'c1', 'r', 1, 'x', 'x', 'x')`).Error)
	done = make(chan error, 1)
	go func() {
		_, err := e.repo.CollectFinishedOperations(context.Background(),
			repository.CollectParams{Before: e.clock.At(time.Hour), Limit: 10})
		done <- err
	}()
	waitBlockedBy(t, e.db, blockerPID)
	return blocker, done
}
