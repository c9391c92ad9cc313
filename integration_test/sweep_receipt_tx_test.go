package integrationtest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// armRacer registers on db a callback that, before the first plain
// candidate INSERT, commits a conflicting candidate (doc-000700 of p1) from
// another connection, as a writer that skips the partition lock would.
func armRacer(t *testing.T, e *env, db *gorm.DB, name string) (armed *atomic.Bool, plain, keeping *atomic.Int32) {
	armed, plain, keeping = &atomic.Bool{}, &atomic.Int32{}, &atomic.Int32{}
	armed.Store(true)
	require.NoError(t, db.Callback().Raw().Before("gorm:raw").Register(name, func(tx *gorm.DB) {
		s := tx.Statement.SQL.String()
		if !strings.HasPrefix(s, "INSERT INTO kubun_connector_sweep_candidate") {
			return
		}
		if strings.Contains(s, "ON CONFLICT") {
			keeping.Add(1)
			return
		}
		plain.Add(1)
		if armed.CompareAndSwap(true, false) {
			require.NoError(t, e.db.Create(&models.SweepCandidate{OwnerDID: partition.OwnerDID,
				ConnectorName: partition.ConnectorName, Partition: partition.Partition, Provenance: "p1",
				DocumentID: "doc-000700", SourceID: models.StrPtr("racer"), ModelID: "contact",
				State: models.CandidatePresent, UpdatedAt: 1}).Error)
		}
	}))
	return armed, plain, keeping
}

// requireRacedResult checks what a relist of manyCands(1500) under p1 left
// beside armRacer's row: the racer's candidate as it wrote it, each
// document once, one receipt.
func requireRacedResult(t *testing.T, e *env) {
	t.Helper()
	c := candidate(t, e, "p1", "doc-000700")
	require.Equal(t, "racer", *c.SourceID)
	require.Equal(t, models.CandidatePresent, c.State)
	require.Equal(t, int64(1500), count(t, e.db, &models.SweepCandidate{}))
	require.Equal(t, int64(1), count(t, e.db, &models.SweepReceipt{}))
}

// TestReceiptRacerInCallersTransaction: the lock-skipping racer of
// TestRecordReceiptRacingWriterWithoutLock, but the recorder runs inside a
// caller's transaction (repo.Transaction, with an application write before
// it, scoped and not): the savepoint's rollback lets the retry keep the
// racer's row, and the application's write survives.
func TestReceiptRacerInCallersTransaction(t *testing.T) {
	t.Parallel()
	for _, scoped := range []bool{false, true} {
		name := "unscoped"
		if scoped {
			name = "scoped"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachPG(t, func(t *testing.T, e *env) {
				db, repo := instance(t, e, repository.Options{})
				armed, plain, keeping := armRacer(t, e, db, "test:racer")
				if scoped {
					var err error
					repo, err = repo.WithScopes(ctx(t), scopes.Owner(partition.OwnerDID))
					require.NoError(t, err)
				}
				require.NoError(t, repo.Transaction(ctx(t), func(tx *gorm.DB, rp *repository.Repository) error {
					require.NoError(t, tx.Exec(`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name,
						"partition", provenance, document_id, model_id, state, updated_at) VALUES ('app', 'crm', 'x', 'y', 'z', 'm', 'pending', 1)`).Error)
					ok, err := rp.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(1500))
					require.NoError(t, err)
					require.True(t, ok)
					return nil
				}))
				require.False(t, armed.Load())
				require.Equal(t, int32(1), plain.Load())
				require.Equal(t, int32(2), keeping.Load())
				require.Equal(t, int64(1), count(t, e.db, &models.SweepCandidate{}, "owner_did = ?", "app"))
				require.NoError(t, e.db.Where("owner_did = ?", "app").Delete(&models.SweepCandidate{}).Error)
				requireRacedResult(t, e)
			})
		})
	}
}

// TestReceiptRacerInCallersTransactionWithoutSavepoints: the same racer,
// the recorder inside a caller's transaction on a handle with gorm's
// DisableNestedTransaction (no savepoints of gorm's). The seed's ON
// CONFLICT DO NOTHING cannot fail on the racer's row, and neither does the
// call: its plain INSERTs run under a savepoint of their own, rolled back
// when they meet the key, so the caller's transaction is never left
// aborted (it was, when a re-run of the whole transaction was the
// fallback).
func TestReceiptRacerInCallersTransactionWithoutSavepoints(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		db, _ := instance(t, e, repository.Options{})
		armRacer(t, e, db, "test:racer")
		nosp := db.Session(&gorm.Session{DisableNestedTransaction: true})
		repo, err := repository.New(nosp, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		err = repo.Transaction(ctx(t), func(tx *gorm.DB, rp *repository.Repository) error {
			ok, err := rp.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(1500))
			if err != nil {
				return err
			}
			require.True(t, ok)
			return nil
		})
		require.NoError(t, err, "the seed (ON CONFLICT DO NOTHING) succeeds here")
		requireRacedResult(t, e)
	})
}

// TestReceiptRepeatableReadCallerSeesNoTakenSequence: a caller's REPEATABLE
// READ transaction took its snapshot before another writer committed a
// candidate of the key (no receipt anywhere). The seed's ON CONFLICT DO
// NOTHING meets the invisible row and fails once with a serialization
// failure (40001, which callers retry); so does the call, after its
// probe (which cannot see the row) and its plain INSERT's rollback. When
// the fallback re-ran the whole transaction, it failed on the row every
// time and ended in ErrRetriesExhausted, claiming a taken sequence.
func TestReceiptRepeatableReadCallerSeesNoTakenSequence(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		obs := &recordingObserver{}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Observer: obs})
		require.NoError(t, err)
		orphan := func(prov string) {
			require.NoError(t, e.db.Create(&models.SweepCandidate{OwnerDID: partition.OwnerDID,
				ConnectorName: partition.ConnectorName, Partition: partition.Partition, Provenance: prov,
				DocumentID: "doc-000700", SourceID: models.StrPtr("other"), ModelID: "contact",
				State: models.CandidatePresent, UpdatedAt: 1}).Error)
		}
		rr := &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
		// The seed's statements, same situation.
		seedErr := e.db.Transaction(func(tx *gorm.DB) error {
			require.NoError(t, tx.Exec("SELECT 1").Error)
			orphan("seed")
			return seedInsert(tx, e.kind, receiptKey("seed"), manyCands(1500), 1)
		}, rr)
		require.Error(t, seedErr)
		require.Contains(t, seedErr.Error(), "could not serialize access")

		var recErr error
		_ = e.db.Transaction(func(tx *gorm.DB) error {
			require.NoError(t, tx.Exec("SELECT 1").Error)
			orphan("p1")
			_, recErr = repo.WithTx(tx).RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(1500))
			return recErr
		}, rr)
		retries := countEvents(obs.take(), repository.EventReceiptRetry)
		t.Logf("seed: %v", seedErr)
		t.Logf("change: %v (%d receipt_retry events)", recErr, retries)
		require.Error(t, recErr)
		require.NotContains(t, recErr.Error(), "sequence still taken", "no receipt exists: no sequence is taken")
		require.NotErrorIs(t, recErr, repository.ErrRetriesExhausted)
		require.Zero(t, retries)
	})
}

// TestReceiptCancelMidRelist: the context is cancelled between two plain
// INSERTs: the call fails with the cancellation, nothing is stored, no
// retry is reported, and the relist recorded again lands whole.
func TestReceiptCancelMidRelist(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		db, _ := instance(t, e, repository.Options{})
		obs := &recordingObserver{}
		repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Observer: obs})
		require.NoError(t, err)
		c, cancel := context.WithCancel(ctx(t))
		var n atomic.Int32
		require.NoError(t, db.Callback().Raw().Before("gorm:raw").Register("test:cancel", func(tx *gorm.DB) {
			if strings.HasPrefix(tx.Statement.SQL.String(), "INSERT INTO kubun_connector_sweep_candidate") && n.Add(1) == 2 {
				cancel()
			}
		}))
		_, err = repo.RecordRelistReceipt(c, receipt("p1"), manyCands(3000))
		require.Error(t, err)
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
		for _, ev := range obs.take() {
			require.NotEqual(t, repository.EventReceiptRetry, ev.Kind)
		}
		require.Zero(t, count(t, e.db, &models.SweepCandidate{}))
		require.Zero(t, count(t, e.db, &models.SweepReceipt{}))
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(3000))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(3000), count(t, e.db, &models.SweepCandidate{}))
	})
}
