package integrationtest

import (
	"context"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// TestCASPathsRefuseTheSameStaleWrite: the three writers of a sync state —
// the plugin guarding an application's Save, the repository's fast CAS
// statement and its scoped builder — refuse the same stale writes: one
// whose row another writer moved on (a newer version), and one whose row
// was deleted and recreated at the same version (another incarnation).
// The stored row is the other writer's, untouched.
func TestCASPathsRefuseTheSameStaleWrite(t *testing.T) {
	t.Parallel()
	key := repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}
	base := repository.SyncStateInput{LastSyncedAt: "t0", EntityCount: 1, Status: models.SyncStatusIdle}
	forEachDB(t, func(t *testing.T, e *env) {
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner("owner"))
		require.NoError(t, err)
		moves := map[string]func(){
			"newer version": func() {
				_, err := e.repo.SetSyncStatus(ctx(t), repository.SetSyncStatusParams{
					Key:    repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
					Status: models.SyncStatusSyncing})
				require.NoError(t, err)
			},
			"recreated": func() {
				require.NoError(t, e.repo.DeleteSyncState(ctx(t), key))
				require.NoError(t, e.repo.SetSyncState(ctx(t), key, base))
			},
		}
		for name, move := range moves {
			writers := map[string]func() error{
				"plugin": func() error {
					stale, err := e.repo.GetSyncState(ctx(t), key)
					require.NoError(t, err)
					move()
					stale.EntityCount = 99
					return e.db.Save(stale).Error
				},
			}
			for label, repo := range map[string]*repository.Repository{"fast": e.repo, "scoped": scoped} {
				writers[label] = func() error {
					zero := 0
					moved := false
					return repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
						Key:        repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
						MaxRetries: &zero, Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
							if !moved { // between this attempt's read and its write
								moved = true
								move()
							}
							return repository.SyncProgressResult{LastSyncedAt: "stale", EntityCount: 99}, nil
						}})
				}
			}
			for label, write := range writers {
				require.NoError(t, e.repo.DeleteSyncState(ctx(t), key))
				require.NoError(t, e.repo.SetSyncState(ctx(t), key, base))
				err := write()
				if label == "plugin" {
					require.ErrorIs(t, err, hooks.ErrConflict, "%s: %s", name, label)
				} else {
					require.ErrorIs(t, err, repository.ErrRetriesExhausted, "%s: %s", name, label)
				}
				row, err := e.repo.GetSyncState(ctx(t), key)
				require.NoError(t, err)
				require.Equal(t, int64(1), row.EntityCount, "%s: %s wrote over the other writer", name, label)
			}
		}
	})
}
