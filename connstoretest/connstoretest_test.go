package connstoretest_test

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

func inputFor(id string) repository.OperationInput {
	return repository.OperationInput{
		CallerDID: "did:example:caller", OperationID: id, NodeKey: "node-" + id, OwnerDID: "did:example:owner",
		ConnectorName: "crm", Model: "contact", Op: "create", AccountKey: "acct", Target: "contacts",
		DeterministicEventID: "evt-" + id, PayloadHash: "hash-" + id, ReissueIntent: models.JSON(`{}`),
	}
}

// stores is one Store per database: SQLite always, PostgreSQL when
// $CONNSTORE_TEST_PG_DSN is set (and required under CI=true).
func stores(t *testing.T) map[string]func(*testing.T) *connstoretest.Store {
	return map[string]func(*testing.T) *connstoretest.Store{
		"sqlite":   func(t *testing.T) *connstoretest.Store { return connstoretest.SQLite(t, connstoretest.Options{}) },
		"postgres": func(t *testing.T) *connstoretest.Store { return connstoretest.Postgres(t, "", connstoretest.Options{}) },
	}
}

// TestWorkOne: each kind of handler result is recorded as the pool records
// it in production, on both databases.
func TestWorkOne(t *testing.T) {
	status := int64(503)
	bad := int64(0)
	cases := []struct {
		name     string
		handler  worker.Handler
		state    string
		attempts int64
		kind     string
	}{
		{"commit", func(context.Context, *models.Operation) worker.Result { return worker.Commit(nil, nil, nil) },
			models.OperationCommitted, 0, ""},
		{"retry", func(context.Context, *models.Operation) worker.Result { return worker.Retry("network", &status) },
			models.OperationAttempted, 1, "network"},
		{"panic", func(context.Context, *models.Operation) worker.Result { panic("boom") },
			models.OperationAttempted, 1, worker.KindPanic},
		{"refused result", func(context.Context, *models.Operation) worker.Result { return worker.Retry("network", &bad) },
			models.OperationAttempted, 1, worker.KindInvalidResult},
		{"dead", func(context.Context, *models.Operation) worker.Result { return worker.Dead("validation", nil) },
			models.OperationDead, 0, ""},
	}
	for db, open := range stores(t) {
		t.Run(db, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					s := open(t)
					op, stats := connstoretest.WorkOne(t, s, inputFor("op-1"), tc.handler)
					require.Equal(t, tc.state, op.State)
					require.Equal(t, tc.attempts, op.Attempts)
					require.Nil(t, op.LeaseToken, "the lease is released with the outcome")
					require.EqualValues(t, 1, stats.Claimed)
					if tc.kind != "" {
						require.NotNil(t, op.LastKind)
						require.Equal(t, tc.kind, *op.LastKind)
					}
				})
			}
		})
	}
}

// TestClockAndIDs: the store reads time and ids only from its sources.
func TestClockAndIDs(t *testing.T) {
	clock := connstoretest.NewClock(time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC))
	s := connstoretest.SQLite(t, connstoretest.Options{Clock: clock, IDs: connstoretest.NewIDs("tok")})
	_, _, err := s.Repo.RecordOperation(context.Background(), inputFor("a"))
	require.NoError(t, err)
	claimed, err := s.Repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, clock.Now().Add(time.Minute).UnixMilli(), *claimed[0].LeaseExpiresAt)
	require.Regexp(t, `^tok-\d+$`, *claimed[0].LeaseToken)

	clock.Advance(2 * time.Minute)
	again, err := s.Repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, again, 1, "the lease ran out on the manual clock")
	require.NotEqual(t, *claimed[0].LeaseToken, *again[0].LeaseToken)
}

// OpenSQLite serves code without a testing.TB: a migrated store on the
// file, on the given clock, reopenable after Close with its rows kept.
func TestOpenSQLite(t *testing.T) {
	path := t.TempDir() + "/open.db"
	clock := connstoretest.NewClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	s, err := connstoretest.OpenSQLite(path, connstoretest.Options{Clock: clock})
	require.NoError(t, err)
	op, _, err := s.Repo.RecordOperation(t.Context(), inputFor("a"))
	require.NoError(t, err)
	require.Equal(t, clock.Millis(), op.CreatedAt)
	require.NoError(t, s.Close())

	again, err := connstoretest.OpenSQLite(path, connstoretest.Options{})
	require.NoError(t, err)
	defer again.Close()
	_, err = again.Repo.GetOperation(t.Context(), repository.OperationKey{CallerDID: op.CallerDID, OperationID: "a"})
	require.NoError(t, err)

	_, err = connstoretest.OpenSQLite(t.TempDir()+"/missing-dir/x.db", connstoretest.Options{})
	require.Error(t, err)
}

// TestNewSchemaAndDropSchema: a program's schema is empty and selected by
// the DSN it gets back, and DropSchema removes it with what it holds.
func TestNewSchemaAndDropSchema(t *testing.T) {
	dsn := connstoretest.SchemaDSN(t, "") // skips (or fails under CI) without a server
	ctx := context.Background()
	name, schemaDSN, err := connstoretest.NewSchema(ctx, dsn, "prog_")
	require.NoError(t, err)
	require.Contains(t, name, "prog_")
	db, err := gorm.Open(postgres.Open(schemaDSN), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	raw, err := db.DB()
	require.NoError(t, err)
	defer raw.Close()
	var current string
	require.NoError(t, db.Raw("SELECT current_schema()").Scan(&current).Error)
	require.Equal(t, name, current)
	require.NoError(t, db.Exec("CREATE TABLE t (a int)").Error)
	require.NoError(t, connstoretest.DropSchema(ctx, dsn, name))
	var n int64
	require.NoError(t, db.Raw("SELECT count(*) FROM pg_namespace WHERE nspname = ?", name).Scan(&n).Error)
	require.Zero(t, n)
}
