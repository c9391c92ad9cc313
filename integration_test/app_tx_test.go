package integrationtest

import (
	"context"
	"errors"
	"testing"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestWithTxWithoutPluginRefused: a transaction from a handle without the
// plugin would run the CAS unguarded; every call refuses it instead.
func TestWithTxWithoutPluginRefused(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
		before, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)
		bare := openDSN(t, e.kind, e.dsn)
		err = bare.Transaction(func(tx *gorm.DB) error {
			r := e.repo.WithTx(tx)
			err := r.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
				Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
					return repository.SyncProgressResult{LastSyncedAt: "t9", EntityCount: 9}, nil
				}})
			require.ErrorIs(t, err, repository.ErrPluginMissing)
			_, err = r.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
			require.ErrorIs(t, err, repository.ErrPluginMissing)
			require.ErrorIs(t, r.Transaction(ctx(t), func(*gorm.DB, *repository.Repository) error { return nil }),
				repository.ErrPluginMissing)
			return nil
		})
		require.NoError(t, err)
		after, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err)
		require.Equal(t, before, after)
	})
}

// TestTransactionWithAppWrite: an application write and repository calls
// in one Transaction commit together and roll back together.
func TestTransactionWithAppWrite(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		boom := errors.New("app failure after both writes")
		err := e.repo.Transaction(ctx(t), func(tx *gorm.DB, repo *repository.Repository) error {
			require.NoError(t, tx.Create(&account{ID: 1, Owner: "o"}).Error)
			require.NoError(t, repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
			_, _, err := repo.RecordOperation(ctx(t), opInput("caller", "op"))
			require.NoError(t, err)
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Zero(t, count(t, e.db, &account{}))
		_, err = e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.ErrorIs(t, err, repository.ErrNotFound, "rolled back with the app's write")
		_, err = e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: "caller", OperationID: "op"})
		require.ErrorIs(t, err, repository.ErrNotFound)

		require.NoError(t, e.repo.Transaction(ctx(t), func(tx *gorm.DB, repo *repository.Repository) error {
			if err := tx.Create(&account{ID: 1, Owner: "o"}).Error; err != nil {
				return err
			}
			return repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t))
		}))
		require.Equal(t, int64(1), count(t, e.db, &account{}))
		_, err = e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
		require.NoError(t, err, "committed with the app's write")
	})
}
