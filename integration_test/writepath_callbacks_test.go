package integrationtest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// TestApplicationUpdateCallbacksSeeTheWrites: an application's own gorm
// callback after gorm:update (an audit, a metric) sees each lease holder's
// write as gorm ran it: not a dry run, and with the rows it changed.
func TestApplicationUpdateCallbacksSeeTheWrites(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		var seen, dry, changed atomic.Int64
		db := e.db.Session(&gorm.Session{})
		require.NoError(t, db.Callback().Update().After("gorm:update").Register("app:audit", func(tx *gorm.DB) {
			if tx.Statement.Table != "kubun_connector_operation" {
				return
			}
			seen.Add(1)
			if tx.DryRun {
				dry.Add(1)
			}
			changed.Add(tx.RowsAffected)
		}))
		t.Cleanup(func() { _ = db.Callback().Update().Remove("app:audit") })
		_, _, err := e.repo.RecordOperation(ctx(t), opInput("caller", "op"))
		require.NoError(t, err)
		ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		_, err = e.repo.HeartbeatOperation(ctx(t), repository.FenceOf(&ops[0]), time.Minute)
		require.NoError(t, err)
		require.Equal(t, int64(2), seen.Load(), "claim and heartbeat each ran the update chain once")
		require.Zero(t, dry.Load(), "the application's callback saw a real write, not a dry run")
		require.Equal(t, int64(2), changed.Load(), "and the rows it changed")
	})
}

// TestLoggerSeesTheRowsEachWriteChanged: a handle opened with gorm's PrepareStmt
// runs the claim, heartbeat and commit, and the logger sees each UPDATE once
// with the rows it changed.
func TestLoggerSeesTheRowsEachWriteChanged(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{pgKind} {
		t.Run(kind, func(t *testing.T) {
			e := setup(t, kind)
			db, err := gorm.Open(postgres.Open(e.dsn), &gorm.Config{Logger: logger.Discard, PrepareStmt: true})
			db = dbtest.OwnPool(t, db, err)
			require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
			rec := &traceRec{Interface: logger.Discard}
			repo, err := repository.New(db.Session(&gorm.Session{Logger: rec}), repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
			require.NoError(t, err)
			c := ctx(t)
			_, _, err = repo.RecordOperation(c, opInput("caller", "op"))
			require.NoError(t, err)
			ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			w, err := repo.HeartbeatOperation(c, repository.FenceOf(&ops[0]), time.Minute)
			require.NoError(t, err)
			_, err = repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(w), DocumentID: models.StrPtr("d")})
			require.NoError(t, err)
			ups := rec.updates()
			require.Len(t, ups, 3)
			for _, u := range ups {
				require.NoError(t, u.err)
				require.Equal(t, int64(1), u.rows, "the logger is told the rows the UPDATE changed: %s", u.sql)
			}
		})
	}
}
