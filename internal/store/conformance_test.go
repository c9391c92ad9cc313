package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// storeCase is one of internal/store's statements or conditions run
// against a real database.
type storeCase struct {
	name string
	run  func(t *testing.T, e *dbtest.Env)
}

// storeOps seeds three attempted operations of owner "store": s0 due at 10,
// s1 due at 20 (recorded without a next attempt: due since created_at), s2
// due at 30 under a live lease; and one committed, s3.
func storeOps(t *testing.T, e *dbtest.Env) {
	t.Helper()
	at := func(v int64) *int64 { return &v }
	rows := []models.Operation{
		dbtest.OpRow(0, models.OperationAttempted, at(10), 1),
		dbtest.OpRow(1, models.OperationAttempted, nil, 20),
		dbtest.OpRow(2, models.OperationAttempted, at(30), 1),
		dbtest.OpRow(3, models.OperationCommitted, nil, 1),
	}
	for i := range rows {
		rows[i].CallerDID, rows[i].OwnerDID = "store", "store"
		rows[i].OperationID = "s" + string(rune('0'+i))
	}
	rows[2].LeaseToken, rows[2].LeaseExpiresAt = models.StrPtr("held"), at(1000)
	require.NoError(t, hooks.SkipLock(e.DB).Create(&rows).Error)
}

// storeKeys plucks the operation ids q selects, in id order.
func storeKeys(t *testing.T, q *gorm.DB) []string {
	t.Helper()
	var ids []string
	require.NoError(t, q.Model(&models.Operation{}).Where("owner_did = ?", "store").Order("operation_id").Pluck("operation_id", &ids).Error)
	return ids
}

var storeCases = []storeCase{
	{"DueBy: attempted and due, by next attempt or recording time", func(t *testing.T, e *dbtest.Env) {
		require.Equal(t, []string{"s0"}, storeKeys(t, e.DB.Where(store.DueBy(15))))
		require.Equal(t, []string{"s0", "s1", "s2"}, storeKeys(t, e.DB.Where(store.DueBy(30))))
	}},
	{"PickedUpdate: an UPDATE of the rows its CTE picks", func(t *testing.T, e *dbtest.Env) {
		sub := e.DB.Model(&models.Operation{}).Select("caller_did", "operation_id").Where("operation_id IN ?", []string{"s1", "s3"})
		tx := hooks.SkipLock(e.DB).Model(&models.Operation{}).Clauses(store.PickedUpdate(sub)).
			Where(store.InPicked).UpdateColumn("attempts", 7)
		require.NoError(t, tx.Error)
		require.Equal(t, int64(2), tx.RowsAffected)
		require.Equal(t, []string{"s1", "s3"}, storeKeys(t, e.DB.Where("attempts = ?", 7)))
	}},
	{"StillHeld: attempted with an unexpired lease", func(t *testing.T, e *dbtest.Env) {
		require.Equal(t, []string{"s2"}, storeKeys(t, e.DB.Where(store.StillHeld(int64(999))).Where("lease_token IS NOT NULL")))
		require.Empty(t, storeKeys(t, e.DB.Where(store.StillHeld(int64(1001))).Where("lease_token IS NOT NULL")))
	}},
	{"KeyInRows: keys from a JSON row source", func(t *testing.T, e *dbtest.Env) {
		from, vars, err := jsonrows.Table(e.Leg.Kind, "v", []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id")},
			[][]any{{"store", "s2"}, {"store", "s0"}, {"other", "s1"}})
		require.NoError(t, err)
		require.Equal(t, []string{"s0", "s2"}, storeKeys(t, e.DB.Where(store.KeyInRows(from, vars))))
	}},
	{"DueAtMost, DueOrder and DueAfter page the overdue listing", func(t *testing.T, e *dbtest.Env) {
		var ids []string
		require.NoError(t, e.DB.Model(&models.Operation{}).Where("owner_did = ? AND state = ?", "store", models.OperationAttempted).
			Where(store.DueAtMost(30)).Where(store.DueAfter(10, "store", "s0")).Order(store.DueOrder).Pluck("operation_id", &ids).Error)
		require.Equal(t, []string{"s1", "s2"}, ids)
	}},
	{"QueueCounts counts by state", func(t *testing.T, e *dbtest.Env) {
		sel, vars := store.QueueCounts(25, int64(25), 15)
		var rows []struct {
			State                       string
			Total, Due, Leased, Overdue int64
			OldestDueAt                 *int64
		}
		require.NoError(t, e.DB.Model(&models.Operation{}).Select(sel, vars...).Where("owner_did = ?", "store").
			Group("connector_name, owner_did, state").Order("state").Scan(&rows).Error)
		require.Len(t, rows, 2)
		att := rows[0]
		require.Equal(t, models.OperationAttempted, att.State)
		require.Equal(t, []int64{3, 2, 1, 1}, []int64{att.Total, att.Due, att.Leased, att.Overdue})
		require.Equal(t, int64(10), *att.OldestDueAt)
	}},
	{"the sync state's CAS read, guarded write and key conditions", func(t *testing.T, e *dbtest.Env) {
		inc := "inc"
		require.NoError(t, hooks.SkipLock(e.DB).Create(&models.SyncState{ConnectorName: "crm", OwnerDID: "store",
			Checkpoint: models.JSON(`{"p":1}`), LastSyncedAt: "t", Status: models.SyncStatusIdle, Lock: models.Lock{Version: 4, Incarnation: &inc}}).Error)
		var checkpoint, recovery models.JSON
		var version int64
		var incarnation, errText *string
		cas := store.NewCAS(e.DB)
		found, err := cas.Read(e.DB, "crm", "store", &checkpoint, &recovery, &errText, &version, &incarnation)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, int64(4), version)
		values := []any{models.JSON(`{"p":2}`), "t2", int64(9), nil, nil, int64(5)}
		stale := cas.Write(e.DB, values, []any{"crm", "store", int64(3), inc, checkpoint, recovery, errText})
		require.NoError(t, stale.Error)
		require.Zero(t, stale.RowsAffected, "a stale version writes nothing")
		msg := "an error the reader did not see"
		unseen := cas.Write(e.DB, values, []any{"crm", "store", version, inc, checkpoint, recovery, &msg})
		require.NoError(t, unseen.Error)
		require.Zero(t, unseen.RowsAffected, "an error other than the one read writes nothing")
		ok := cas.Write(e.DB, values, []any{"crm", "store", version, inc, checkpoint, recovery, errText})
		require.NoError(t, ok.Error)
		require.Equal(t, int64(1), ok.RowsAffected)
		var n int64
		require.NoError(t, e.DB.Model(&models.SyncState{}).Where(store.KeyIs("crm", "store")).
			Where(store.CASGuard("crm", "store", int64(5), inc, models.JSON(`{"p":2}`), nil, nil)).Count(&n).Error)
		require.Equal(t, int64(1), n)
		require.NoError(t, e.DB.Model(&models.SyncState{}).Where(store.OwnerAfter("stor")).Count(&n).Error)
		require.Equal(t, int64(1), n)
		require.NoError(t, e.DB.Model(&models.SyncState{}).
			Where(store.StatusUnchanged("crm", "store", 5, inc, models.SyncStatusIdle, nil)).Count(&n).Error)
		require.Equal(t, int64(1), n, "a NULL error matches NULL")
		found, err = cas.Read(e.DB, "crm", "nobody", &checkpoint, &recovery, &errText, &version, &incarnation)
		require.NoError(t, err)
		require.False(t, found)
	}},
	{"a fixed statement runs as db.Exec and db.Raw do: same text and values, through the callbacks", func(t *testing.T, e *dbtest.Env) {
		const q = "UPDATE kubun_connector_sync_state SET entity_count = ? WHERE connector_name = ? AND owner_did = ? AND error IS NOT DISTINCT FROM ?"
		fixed := store.Render(e.DB, q)
		vars := []any{int64(7), "crm", "fixed", (*string)(nil)}
		dry := e.DB.Session(&gorm.Session{DryRun: true})
		want, got := dry.Exec(q, vars...).Statement, fixed.Exec(dry, vars...).Statement
		require.Equal(t, want.SQL.String(), got.SQL.String())
		require.Equal(t, want.SQL.String(), fixed.Text())
		require.Equal(t, want.Vars, got.Vars)

		// The application's logger sees both statements, with their values.
		seen := &sqlLog{}
		logged := e.DB.Session(&gorm.Session{Logger: seen})
		inc := "inc"
		require.NoError(t, hooks.SkipLock(e.DB).Create(&models.SyncState{ConnectorName: "crm", OwnerDID: "fixed",
			LastSyncedAt: "t", Status: models.SyncStatusIdle, Lock: models.Lock{Version: 1, Incarnation: &inc}}).Error)
		res := fixed.Exec(logged, vars...)
		require.NoError(t, res.Error)
		require.Equal(t, int64(1), res.RowsAffected)
		read := store.Render(e.DB, "SELECT entity_count FROM kubun_connector_sync_state WHERE connector_name = ? AND owner_did = ?")
		rows, err := read.Rows(logged, "crm", "fixed")
		require.NoError(t, err)
		var count []int64
		for rows.Next() {
			var n int64
			require.NoError(t, rows.Scan(&n))
			count = append(count, n)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		require.Equal(t, []int64{7}, count)
		require.Len(t, seen.sql, 2)
		require.Contains(t, seen.sql[0], "UPDATE kubun_connector_sync_state SET entity_count = 7")
		require.Contains(t, seen.sql[1], "SELECT entity_count FROM kubun_connector_sync_state")

		// Values that do not fit its variables are refused before anything runs.
		bad := fixed.Exec(e.DB, int64(8), "crm")
		require.ErrorContains(t, bad.Error, "2 values for a statement of 4 variables")
		var n int64
		require.NoError(t, e.DB.Model(&models.SyncState{}).Where("owner_did = ? AND entity_count = ?", "fixed", 7).Count(&n).Error)
		require.Equal(t, int64(1), n)
	}},
	{"candidates: inserted once from a row source, by provenance and sequence", func(t *testing.T, e *dbtest.Env) {
		from, vars, err := jsonrows.Table(e.Leg.Kind, "v", []jsonrows.Col{jsonrows.Text("v_document_id"), jsonrows.Text("v_source_id"),
			jsonrows.Text("v_model_id")}, [][]any{{"d1", nil, "m"}, {"d2", "src", "m"}, {"d1", nil, "m"}})
		require.NoError(t, err)
		for range 2 { // a second insert leaves them as they are
			require.NoError(t, store.InsertCandidates(e.DB, "store", "crm", "p", "prov", models.CandidatePending, 7, from, vars, true))
		}
		var n int64
		require.NoError(t, e.DB.Model(&models.SweepCandidate{}).Where(store.ProvenanceIn([]string{"prov"})).Count(&n).Error)
		require.Equal(t, int64(2), n)
		// The plain form: fresh rows go in; a taken key is a unique
		// violation, on which the recorder rolls back to its savepoint and
		// takes the general form, and the statement inserts nothing.
		fresh, freshVars, err := jsonrows.Table(e.Leg.Kind, "v", []jsonrows.Col{jsonrows.Text("v_document_id"),
			jsonrows.Text("v_source_id"), jsonrows.Text("v_model_id")}, [][]any{{"d1", nil, "m"}, {"d2", nil, "m"}})
		require.NoError(t, err)
		require.NoError(t, store.InsertCandidates(e.DB, "store", "crm", "p", "plain", models.CandidatePending, 7, fresh, freshVars, false))
		err = store.InsertCandidates(e.DB, "store", "crm", "p", "plain", models.CandidatePending, 8, fresh, freshVars, false)
		require.Error(t, err)
		require.ErrorIs(t, e.DB.Dialector.(gorm.ErrorTranslator).Translate(err), gorm.ErrDuplicatedKey)
		require.NoError(t, e.DB.Model(&models.SweepCandidate{}).Where(store.ProvenanceIn([]string{"plain"})).Where("updated_at = 7").Count(&n).Error)
		require.Equal(t, int64(2), n)
		require.NoError(t, hooks.SkipLock(e.DB).Create(&models.SweepReceipt{OwnerDID: "store", ConnectorName: "crm", Partition: "p",
			Provenance: "prov", Sequence: 3, ModelID: "m", SourceFetchHLC: "h", Kind: "full", Complete: 1}).Error)
		require.NoError(t, e.DB.Model(&models.SweepReceipt{}).Where(store.SequenceBefore(4)).Where(store.Uncommitted).Count(&n).Error)
		require.Equal(t, int64(1), n)
		require.NoError(t, e.DB.Model(&models.SweepReceipt{}).Where(store.SequenceBefore(3)).Count(&n).Error)
		require.Zero(t, n)
	}},
	{"retention: rows to judge, the keep rules over a window, the re-check, the release, the finished queue", func(t *testing.T, e *dbtest.Env) {
		doc := "ret-doc"
		for i, id := range []string{"r-old", "r-new", "r-leased"} {
			row := dbtest.OpRow(100+i, models.OperationCommitted, nil, int64(5+i))
			row.OperationID, row.OwnerDID, row.DocumentID = id, "ret", &doc
			if id == "r-leased" {
				expires := int64(50)
				row.CallerDID, row.LeaseToken, row.LeaseExpiresAt = "other", models.StrPtr("t"), &expires
			}
			require.NoError(t, hooks.SkipLock(e.DB).Create(&row).Error)
		}
		args := map[string]any{"before": int64(100), "now": int64(0)}
		entries := func() *gorm.DB {
			return e.DB.Model(&models.RetentionPending{}).Select(store.EntryColumns).Where(store.Waiting, args).
				Where("owner_did = ?", "ret").Order(store.EntryKey)
		}
		judged := e.DB.Table(store.JudgedRows(), entries()).Select(store.JudgedColumns).Where(store.Unleased, args)
		pick := func(window *gorm.DB, cond string) []string {
			var ids []string
			require.NoError(t, e.DB.Table(store.Window, window).Where(cond).Order(store.WindowOrder).Pluck("o.operation_id", &ids).Error)
			return ids
		}
		require.Equal(t, []string{"r-old"}, pick(judged, store.CollectableInWindow), "superseded by the newer commit")
		require.Equal(t, []string{"r-new"}, pick(judged, store.KeptInWindow), "the caller's newest commit; r-leased is not judged")
		heldRows := func() []string {
			var ids []string
			require.NoError(t, e.DB.Model(&models.RetentionHeld{}).Order("operation_id").Pluck("operation_id", &ids).Error)
			return ids
		}
		hold := func() {
			kept := e.DB.Table(store.Window, judged).Select(store.HeldColumns).Where(store.KeptInWindow)
			require.NoError(t, store.Hold(e.DB, kept))
		}
		hold()
		require.Equal(t, []string{"r-new"}, heldRows(), "the hold records the kept row by document")
		hold()
		require.Equal(t, []string{"r-new"}, heldRows(), "holding a held row again changes nothing")
		withRows := func() *gorm.DB {
			return e.DB.Table(store.EntryRows(), entries()).Select(store.EntryRowColumns)
		}
		require.Equal(t, []string{"r-new"}, pick(withRows(), store.Settled), "settled: the held row; the leased and the collectable stay")
		var n int64
		require.NoError(t, e.DB.Model(&models.Operation{}).Where("owner_did = ?", "ret").Where(store.Recheck, args).Count(&n).Error)
		require.Equal(t, int64(2), n, "the leased row is never deleted")

		// The triggers keep the rows to judge: an entry per finished row, gone
		// with the row's delete, moved by a rewrite, gone when it is attempted.
		waiting := func() []string {
			var ids []string
			require.NoError(t, e.DB.Model(&models.RetentionPending{}).Where("owner_did = ?", "ret").Order("operation_id").
				Pluck("operation_id", &ids).Error)
			return ids
		}
		require.Equal(t, []string{"r-leased", "r-new", "r-old"}, waiting())
		require.NoError(t, e.DB.Where("operation_id = ?", "r-old").Delete(&models.Operation{}).Error)
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Delete(&models.RetentionPending{}).Error) // settled
		require.Equal(t, []string{"r-leased"}, waiting())
		require.NoError(t, hooks.SkipLock(e.DB).Model(&models.Operation{}).Where("operation_id = ?", "r-leased").
			UpdateColumn("state", models.OperationAttempted).Error)
		require.Empty(t, waiting(), "an attempted row is not judged")
		require.NoError(t, hooks.SkipLock(e.DB).Model(&models.Operation{}).Where("operation_id = ?", "r-leased").
			UpdateColumns(map[string]any{"state": models.OperationDead, "updated_at": int64(9)}).Error)
		var entry models.RetentionPending
		require.NoError(t, e.DB.Where("operation_id = ?", "r-leased").Take(&entry).Error)
		require.Equal(t, int64(9), entry.UpdatedAt, "finished again: waiting as it now stands")

		require.NoError(t, store.Release(e.DB, []string{"other-doc"}, 50))
		require.Equal(t, []string{"r-new"}, heldRows(), "another document's release leaves the hold")
		require.NoError(t, store.Release(e.DB, []string{doc}, 50))
		require.Equal(t, []string{"r-leased", "r-new"}, waiting(), "the release puts the document's held rows back")
		require.Empty(t, heldRows(), "and takes them out of the held rows")
		var released models.RetentionPending
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Take(&released).Error)
		require.Equal(t, []int64{50, 6}, []int64{released.Ord, released.UpdatedAt}, "placed at the release, behind the rows waiting")
		require.NoError(t, store.Release(e.DB, []string{doc}, 50), "a document with nothing held")

		// A held row that changes, or goes, leaves the held rows.
		hold()
		require.Equal(t, []string{"r-new"}, heldRows())
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Delete(&models.RetentionPending{}).Error) // settled
		require.NoError(t, store.Release(e.DB, []string{doc}, 1))
		var again models.RetentionPending
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Take(&again).Error)
		require.Equal(t, int64(6), again.Ord, "a release never places a row before its updated_at")
		hold()
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Delete(&models.RetentionPending{}).Error) // settled
		require.NoError(t, hooks.SkipLock(e.DB).Model(&models.Operation{}).Where("operation_id = ?", "r-new").
			UpdateColumn("document_id", "moved").Error)
		require.Empty(t, heldRows(), "moved to another document: judged again")
		require.Equal(t, []string{"r-leased", "r-new"}, waiting())
		require.NoError(t, hooks.SkipLock(e.DB).Model(&models.Operation{}).Where("operation_id = ?", "r-new").
			UpdateColumn("document_id", doc).Error)
		hold()
		require.Equal(t, []string{"r-new"}, heldRows())
		require.NoError(t, e.DB.Where("operation_id = ?", "r-new").Delete(&models.Operation{}).Error)
		require.Empty(t, heldRows(), "deleted: no held entry left")

		_, err := store.ConsumeFinished(e.DB, 1000) // the triggers' entries
		require.NoError(t, err)
		require.NoError(t, e.DB.Create(&[]models.RetentionFinished{{DocumentID: "q1"}, {DocumentID: "q2"}}).Error)
		for _, want := range []string{"q1", "q2"} {
			docs, err := store.ConsumeFinished(e.DB, 1)
			require.NoError(t, err)
			require.Equal(t, []string{want}, docs, "oldest first, one at a time")
		}
	}},
	{"the batch's join: fence, row values, flagged values, guards", func(t *testing.T, e *dbtest.Env) {
		from, vars, err := jsonrows.Table(e.Leg.Kind, "v", []jsonrows.Col{jsonrows.Text("v_caller_did"), jsonrows.Text("v_operation_id"),
			jsonrows.Text("v_lease_token"), jsonrows.Text("v_last_kind"), {Name: "s_last_kind", Type: "boolean"},
			jsonrows.Text("g_document_id")},
			[][]any{{"store", "s2", "held", "a", true, "doc"}, {"store", "s0", nil, "b", true, nil}})
		require.NoError(t, err)
		q := e.DB.Model(&models.Operation{}).Clauses(fromClause{clause.Expr{SQL: from, Vars: vars}})
		res := q.Where(store.FenceJoin).Where(store.RowGuard("document_id", true)).
			Updates(map[string]any{"last_kind": store.RowValueIf("last_kind"), "attempts": store.Increment("", "attempts")})
		require.NoError(t, res.Error)
		require.Equal(t, int64(1), res.RowsAffected, "s2 only: s0's row has no token to match")
		var got models.Operation
		require.NoError(t, e.DB.Where("operation_id = ?", "s2").First(&got).Error)
		require.Equal(t, "a", *got.LastKind)
		require.Equal(t, int64(1), got.Attempts)
		var v int64
		// As a lease on the database's clock is: an expression plus a value.
		require.NoError(t, e.DB.Raw("SELECT ?", store.Plus(gorm.Expr("CAST(2 AS BIGINT)"), int64(3))).Scan(&v).Error)
		require.Equal(t, int64(5), v)
	}},
	{"RefusedAfter and Below: a candidate's failures and a checkpoint's bound", func(t *testing.T, e *dbtest.Env) {
		require.NoError(t, hooks.SkipLock(e.DB).Create(&models.SweepCandidate{OwnerDID: "store", ConnectorName: "crm", Partition: "p",
			Provenance: "r", DocumentID: "d", ModelID: "m", State: models.CandidatePending, ApplyFailures: 2}).Error)
		for want, limit := range map[string]int{models.CandidateRefused: 2, models.CandidatePending: 3} {
			var state string
			require.NoError(t, e.DB.Model(&models.SweepCandidate{}).Select("?", store.RefusedAfter(limit, models.CandidateRefused,
				models.CandidatePending)).Where("provenance = ?", "r").Scan(&state).Error)
			require.Equal(t, want, state, "limit %d", limit)
		}
		var n int64
		require.NoError(t, e.DB.Model(&models.SweepCandidate{}).Where(store.Below("apply_failures", 3)).Where("provenance = ?", "r").Count(&n).Error)
		require.Equal(t, int64(1), n)
	}},
	{"StateIn: pending authorizations by a subquery of states", func(t *testing.T, e *dbtest.Env) {
		for _, s := range []string{"a", "b", "c"} {
			require.NoError(t, e.DB.Create(&models.PendingAuth{State: s, ExpiresAt: 1}).Error)
		}
		sub := e.DB.Model(&models.PendingAuth{}).Select("state").Where("state <> ?", "b")
		var n int64
		require.NoError(t, e.DB.Model(&models.PendingAuth{}).Where(store.StateIn(sub)).Count(&n).Error)
		require.Equal(t, int64(2), n)
	}},
}

// TestStoreConformance runs every internal/store statement and condition
// on every database leg (dbtest.All: PostgreSQL, SQLite through
// sqliteconn, SQLite through a plain DSN, partitioned PostgreSQL).
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, dbtest.All(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		storeOps(t, e)
		for _, c := range storeCases {
			t.Run(c.name, func(t *testing.T) { c.run(t, e) })
		}
	})
}

// sqlLog is a gorm logger that keeps the text of every statement traced.
type sqlLog struct{ sql []string }

func (l *sqlLog) LogMode(logger.LogLevel) logger.Interface { return l }
func (l *sqlLog) Info(context.Context, string, ...any)     {}
func (l *sqlLog) Warn(context.Context, string, ...any)     {}
func (l *sqlLog) Error(context.Context, string, ...any)    {}
func (l *sqlLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	l.sql = append(l.sql, sql)
}

// fromClause is an UPDATE's FROM: the batch's row source, as the
// repository's planner adds it.
type fromClause struct{ expr clause.Expr }

func (fromClause) Name() string                   { return "FROM" }
func (f fromClause) Build(b clause.Builder)       { f.expr.Build(b) }
func (f fromClause) MergeClause(c *clause.Clause) { c.Expression = f }
