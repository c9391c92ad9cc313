package integrationtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// TestScopedWritesWithReplicaDown: behind dbresolver with a replica that is
// down, WithScopes and scoped writes (their scope checks decide a write, so
// they read the primary) work as without a replica; a scoped batch checks
// its scopes in one statement.
func TestScopedWritesWithReplicaDown(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	replica, err := sql.Open("pgx", e.dsn)
	require.NoError(t, err)
	db := openDSN(t, pgKind, e.dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
	require.NoError(t, db.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.New(postgres.Config{Conn: replica})}})))
	require.NoError(t, replica.Close()) // the replica goes down: every read sent to it fails
	repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
	require.NoError(t, err)

	scoped, err := repo.WithScopes(ctx(t), scopes.Owner("owner"))
	require.NoError(t, err, "the scope probe reads the primary")
	require.NoError(t, scoped.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}, baseState(t)))
	_, _, err = scoped.RecordOperation(ctx(t), opInput("caller", "one"))
	require.NoError(t, err)
	out, err := scoped.RecordOperations(ctx(t), manyInputs("many", 50))
	require.NoError(t, err)
	require.Len(t, out, 50)
	outside := opInput("caller", "outside")
	outside.OwnerDID = "other"
	_, _, err = scoped.RecordOperation(ctx(t), outside)
	require.ErrorIs(t, err, repository.ErrOutOfScope)
}

// TestScopedBatchChecksScopesOnce: a scoped RecordOperations of 500 items
// is a handful of statements (one scope check, the inserts, one read-back),
// not one scope check per item.
func TestScopedBatchChecksScopesOnce(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, rec := recordingRepo(t, e)
		scoped, err := repo.WithScopes(ctx(t), scopes.Owner("owner"))
		require.NoError(t, err)
		rec.take()
		_, err = scoped.RecordOperations(ctx(t), manyInputs("s", 500))
		require.NoError(t, err)
		require.LessOrEqual(t, len(rec.take()), 5)
	})
}

// TestWithScopesReportsTheDatabase: a scope naming a column the tables do
// not share is ErrInvalidInput; a database that cannot be reached is its
// own error, never ErrInvalidInput.
func TestWithScopesReportsTheDatabase(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, err := e.repo.WithScopes(ctx(t), func(db *gorm.DB) *gorm.DB { return db.Where("state = ?", "x") })
		require.ErrorIs(t, err, repository.ErrInvalidInput)

		down := openDSN(t, e.kind, e.dsn)
		require.NoError(t, down.Use(hooks.New(hooks.Config{})))
		repo, err := repository.New(down, repository.Options{})
		require.NoError(t, err)
		raw, err := down.DB()
		require.NoError(t, err)
		require.NoError(t, raw.Close())
		_, err = repo.WithScopes(ctx(t), scopes.Owner("owner"))
		require.Error(t, err)
		require.NotErrorIs(t, err, repository.ErrInvalidInput)
	})
}

// TestNilAndZeroArguments: nil handles, callbacks and scopes, an id source
// that returns empty lease tokens and a backoff that would re-drive at once
// are ErrInvalidInput, never a panic, and nothing is written.
func TestNilAndZeroArguments(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, err := repository.New(nil, repository.Options{})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		for name, b := range map[string]*repository.ExponentialBackoff{
			"all zero":         {},
			"max below base":   {Base: 2, Max: 1},
			"jitter over one":  {Base: 1, Max: 2, Jitter: 1.5},
			"negative attempt": {Base: 1, Max: 2, MaxAttempts: -1},
		} {
			_, err = repository.New(e.db, repository.Options{Backoff: b})
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
		}
		require.ErrorIs(t, e.repo.Transaction(ctx(t), nil), repository.ErrInvalidInput)
		_, err = e.repo.WithScopes(ctx(t), nil)
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		_, err = e.repo.WithTx(nil).GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.ErrorIs(t, err, repository.ErrInvalidInput)

		recordOp(t, e, "caller", "op")
		empty, err := repository.New(e.db, repository.Options{NewIDFunc: func() string { return "" }})
		require.NoError(t, err)
		before := checksum(t, e.db)
		_, err = empty.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 1, LeaseFor: 1e9})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.Equal(t, before, checksum(t, e.db), "no lease taken")
	})
}
