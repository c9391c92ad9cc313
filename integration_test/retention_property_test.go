package integrationtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// refNewer is the seed's order: created_at, then caller, then operation id.
func refNewer(n, o *models.Operation) bool {
	if n.CreatedAt != o.CreatedAt {
		return n.CreatedAt > o.CreatedAt
	}
	if n.CallerDID != o.CallerDID {
		return n.CallerDID > o.CallerDID
	}
	return n.OperationID > o.OperationID
}

// refNewerExists: a newer row of states on o's document sharing o's caller
// (byCaller) or owner.
func refNewerExists(all []models.Operation, o *models.Operation, byCaller bool, states ...string) bool {
	for i := range all {
		n := &all[i]
		same := n.OwnerDID == o.OwnerDID
		if byCaller {
			same = n.CallerDID == o.CallerDID
		}
		if n.DocumentID != nil && *n.DocumentID == *o.DocumentID && same &&
			slices.Contains(states, n.State) && refNewer(n, o) {
			return true
		}
	}
	return false
}

// refCollect is the reference model of one CollectFinishedOperations(before,
// limit) at now: the ids it must delete, and how many rows of its window
// the keep rules collect. A pass's window is the first CollectBudget ×
// limit finished rows not held (waiting reports those, and each one's
// place in the pass order) placed before the cutoff, in (place, caller,
// operation id) order; it judges those with no live lease and deletes the
// first limit of them the keep rules collect, the rules looking at every
// row.
func refCollect(all []models.Operation, waiting func(*models.Operation) (int64, bool), before, now int64, limit int) (deleted []string, collectable int) {
	const c, d = models.OperationCommitted, models.OperationDead
	var window []models.Operation
	place := map[string]int64{}
	for i := range all {
		o := &all[i]
		ord, ok := waiting(o)
		if !ok || (o.State != c && o.State != d) || ord >= before {
			continue
		}
		place[o.OperationID] = ord
		window = append(window, *o)
	}
	sort.Slice(window, func(i, j int) bool {
		a, b := window[i], window[j]
		if place[a.OperationID] != place[b.OperationID] {
			return place[a.OperationID] < place[b.OperationID]
		}
		if a.CallerDID != b.CallerDID {
			return a.CallerDID < b.CallerDID
		}
		return a.OperationID < b.OperationID
	})
	window = window[:min(len(window), repository.CollectBudget*limit)]
	var picked []models.Operation
	for i := range window {
		o := &window[i]
		if (o.LeaseToken == nil || *o.LeaseExpiresAt < now) && refCollectable(all, o) {
			picked = append(picked, *o)
		}
	}
	out := ids(picked[:min(limit, len(picked))])
	sort.Strings(out)
	return out, len(picked)
}

// everyFinished is waiting for a journal no pass has judged: every
// finished row waits, at its updated_at.
func everyFinished(o *models.Operation) (int64, bool) { return o.UpdatedAt, true }

// waitingNow reads which rows wait to be judged (have an entry), and where
// in the pass order (the first of their entries).
func waitingNow(t *testing.T, e *env) map[string]int64 {
	t.Helper()
	var entries []models.RetentionPending
	require.NoError(t, e.db.Order("ord").Find(&entries).Error)
	in := map[string]int64{}
	for _, p := range entries {
		if _, ok := in[p.CallerDID+"\x00"+p.OperationID]; !ok {
			in[p.CallerDID+"\x00"+p.OperationID] = p.Ord
		}
	}
	return in
}

// refCollectable is the seed's keep rules on a finished row o: linked to no
// document, or superseded on it by caller and by owner.
func refCollectable(all []models.Operation, o *models.Operation) bool {
	const c, d = models.OperationCommitted, models.OperationDead
	return o.DocumentID == nil ||
		((o.State != c || refNewerExists(all, o, true, c)) &&
			(o.State != c || refNewerExists(all, o, false, c)) &&
			refNewerExists(all, o, true, c, d) && refNewerExists(all, o, false, c, d))
}

// drainPasses runs unscoped passes until one deletes nothing, failing
// after bound passes that each deleted rows.
func drainPasses(t *testing.T, e *env, bound int) {
	t.Helper()
	for i := 0; passWith(t, e, e.repo, "") > 0; i++ {
		require.Less(t, i, bound)
	}
}

// drainAttempted claims what is still attempted, 50 at a time, and hands
// each claim to finish, until a claim finds nothing; it fails after bound
// claims that each found rows (a finish that left its rows due would
// otherwise loop for ever).
func drainAttempted(t *testing.T, e *env, bound int, finish func(claimed []models.Operation)) {
	t.Helper()
	for i := 0; ; i++ {
		claimed, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 50, LeaseFor: time.Minute})
		require.NoError(t, err)
		if len(claimed) == 0 {
			return
		}
		require.Less(t, i, bound, "still claiming after %d claims of due rows", bound)
		finish(claimed)
	}
}

// collectableLeft names the finished rows among all that the keep rules
// would collect.
func collectableLeft(all []models.Operation) []string {
	var left []string
	for i := range all {
		if (all[i].State == models.OperationCommitted || all[i].State == models.OperationDead) && refCollectable(all, &all[i]) {
			left = append(left, all[i].OperationID)
		}
	}
	return left
}

// requireNoHeldCollectable checks the no-leak invariant after a pass: no
// held row (finished, with no entry among the rows to judge) is one the
// keep rules would collect.
func requireNoHeldCollectable(t *testing.T, e *env, msgAndArgs ...any) {
	t.Helper()
	var rows []models.Operation
	require.NoError(t, e.db.Find(&rows).Error)
	waiting := waitingNow(t, e)
	for i := range rows {
		o := &rows[i]
		if _, ok := waiting[o.CallerDID+"\x00"+o.OperationID]; (o.State == models.OperationCommitted || o.State == models.OperationDead) && !ok {
			require.False(t, refCollectable(rows, o), append([]any{"held but collectable: %s"}, o.OperationID, msgAndArgs)...)
		}
	}
}

func randomHistory(r *rand.Rand, now int64) []models.Operation {
	states := []string{models.OperationCommitted, models.OperationCommitted, models.OperationDead,
		models.OperationAttempted, models.OperationReconcileOnly}
	docs := []*string{nil, models.StrPtr("d1"), models.StrPtr("d1"), models.StrPtr("d2")}
	rows := make([]models.Operation, 1+r.IntN(25))
	for i := range rows {
		op := dbtest.OpRow(i, states[r.IntN(len(states))], nil, int64(r.IntN(6)))
		op.OperationID = fmt.Sprintf("op%02d", i)
		op.CallerDID = fmt.Sprintf("c%d", r.IntN(3))
		op.OwnerDID = fmt.Sprintf("o%d", r.IntN(2))
		op.DocumentID = docs[r.IntN(len(docs))]
		op.UpdatedAt = int64(r.IntN(11))
		switch r.IntN(4) {
		case 0:
			op.LeaseToken, op.LeaseExpiresAt = models.StrPtr("t"), ptr(now+1000)
		case 1:
			op.LeaseToken, op.LeaseExpiresAt = models.StrPtr("t"), ptr(now-1000)
		}
		rows[i] = op
	}
	return rows
}

// TestRetentionMatchesReferenceModel: on hundreds of seeded random
// histories the DELETE removes exactly the reference model's set.
func TestRetentionMatchesReferenceModel(t *testing.T) {
	t.Parallel()
	const cases, seed = 300, 20261202
	forEachDB(t, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(seed, 1))
		now := e.clock.Millis()
		var deleting, limited, keptByDocument int
		for i := range cases {
			require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_operation").Error)
			rows := randomHistory(r, now)
			seedOps(t, e, rows)
			before, limit := int64(r.IntN(12)), 1+r.IntN(len(rows)+2)
			if r.IntN(2) == 0 { // small batches, so the limit often binds
				limit = 1 + r.IntN(3)
			}
			want, collectable := refCollect(rows, everyFinished, before, now, limit)
			deleting += min(len(want), 1)
			if collectable > limit {
				limited++
			}
			if _, all := refCollect(rows, everyFinished, 1<<40, now-1<<40, 1<<20); all < len(rows) {
				keptByDocument++
			}

			n := collect(t, e, time.UnixMilli(before), limit)
			deleted := deletedSince(t, e, rows)
			require.Equal(t, append([]string{}, want...), deleted, "case %d (seed %d): before=%d limit=%d now=%d\n%s",
				i, seed, before, limit, now, describe(rows))
			require.Equal(t, int64(len(want)), n, "case %d", i)
		}
		// The generator must exercise deletes, the limit and the keep rules.
		require.Greater(t, deleting, cases/4)
		require.Greater(t, limited, cases/20)
		require.Greater(t, keptByDocument, cases/4)
	})
}

// deletedSince returns, sorted, the ids of rows no longer stored.
func deletedSince(t *testing.T, e *env, rows []models.Operation) []string {
	t.Helper()
	kept := remaining(t, e)
	deleted := []string{}
	for _, op := range rows {
		if !slices.Contains(kept, op.OperationID) {
			deleted = append(deleted, op.OperationID)
		}
	}
	sort.Strings(deleted)
	return deleted
}

// describe prints a history compactly for a failing case.
func describe(rows []models.Operation) string {
	var b strings.Builder
	for _, o := range rows {
		doc, lease := "-", "-"
		if o.DocumentID != nil {
			doc = *o.DocumentID
		}
		if o.LeaseExpiresAt != nil {
			lease = fmt.Sprint(*o.LeaseExpiresAt)
		}
		fmt.Fprintf(&b, "%s caller=%s owner=%s %s doc=%s created=%d updated=%d lease=%s\n",
			o.OperationID, o.CallerDID, o.OwnerDID, o.State, doc, o.CreatedAt, o.UpdatedAt, lease)
	}
	return b.String()
}

// TestRetentionPassesMatchReferenceModel: pass after pass, with rows
// finishing between passes (superseding rows a previous pass held), every
// pass deletes exactly the reference model's set over the current rows.
func TestRetentionPassesMatchReferenceModel(t *testing.T) {
	t.Parallel()
	const cases, passes, seed = 120, 4, 20261203
	forEachDB(t, func(t *testing.T, e *env) {
		r := rand.New(rand.NewPCG(seed, 2))
		var reopened int
		for i := range cases {
			require.NoError(t, e.db.Exec("DELETE FROM kubun_connector_operation").Error)
			seedOps(t, e, randomHistory(r, e.clock.Millis()))
			for pass := range passes {
				now := e.clock.Millis()
				var rows []models.Operation
				require.NoError(t, e.db.Find(&rows).Error)
				// The pass first releases the holds on documents queued by
				// finishes since the last one.
				var queued []string
				require.NoError(t, e.db.Model(&models.RetentionFinished{}).Pluck("document_id", &queued).Error)
				entered := waitingNow(t, e)
				before, limit := int64(r.IntN(12)), 1+r.IntN(4)
				// Released rows queue at the pass's now, or just before its
				// cutoff if that is earlier (never before their updated_at).
				released := min(now, before-1)
				waiting := func(o *models.Operation) (int64, bool) {
					if ord, ok := entered[o.CallerDID+"\x00"+o.OperationID]; ok {
						return ord, true
					}
					if o.DocumentID != nil && slices.Contains(queued, *o.DocumentID) {
						return max(o.UpdatedAt, released), true
					}
					return 0, false
				}
				want, _ := refCollect(rows, waiting, before, now, limit)
				n := collect(t, e, time.UnixMilli(before), limit)
				kept := remaining(t, e)
				deleted := deletedSince(t, e, rows)
				require.Equal(t, append([]string{}, want...), deleted, "case %d pass %d: before=%d limit=%d\n%s",
					i, pass, before, limit, describe(rows))
				require.Equal(t, int64(len(want)), n)
				requireNoHeldCollectable(t, e, "case %d pass %d", i, pass)
				finished := count(t, e.db, &models.Operation{}, "state IN ?", []string{models.OperationCommitted, models.OperationDead})
				if finished > count(t, e.db, &models.RetentionPending{}) {
					reopened++ // rows are held
				}
				// Between passes some attempted rows finish, now or later.
				e.clock.Advance(time.Millisecond)
				for _, op := range rows {
					if op.State == models.OperationAttempted && r.IntN(2) == 0 && slices.Contains(kept, op.OperationID) {
						state := []string{models.OperationCommitted, models.OperationDead}[r.IntN(2)]
						require.NoError(t, e.db.Model(&models.Operation{}).Where("operation_id = ?", op.OperationID).
							Updates(map[string]any{"state": state, "updated_at": e.clock.Millis(), "lease_token": nil,
								"lease_expires_at": nil}).Error)
					}
				}
			}
		}
		require.Greater(t, reopened, cases/4, "passes held rows that later finishes had to release")
	})
}
