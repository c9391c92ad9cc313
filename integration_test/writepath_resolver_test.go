package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"
)

// TestWritesFollowANamedResolver: behind dbresolver with a named resolver
// ("b", its own database) chosen by dbresolver.Use on the handle given to
// the repository, every statement goes to "b", the lease holder's writes
// included (a write run on a fresh session would drop the Use clause and go
// to the default database).
func TestWritesFollowANamedResolver(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind) // database A: the global resolver
	bDSN := dbtest.SchemaDSN(t, "")
	b := openDSN(t, pgKind, bDSN)
	require.NoError(t, migrations.Migrate(context.Background(), b))

	db := openDSN(t, pgKind, e.dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
	require.NoError(t, db.Use(dbresolver.Register(dbresolver.Config{}).
		Register(dbresolver.Config{Sources: []gorm.Dialector{postgres.Open(bDSN)}}, "b")))
	repo, err := repository.New(db.Clauses(dbresolver.Use("b")), repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
	require.NoError(t, err)
	c := ctx(t)

	_, _, err = repo.RecordOperation(c, opInput("caller", "op"))
	require.NoError(t, err)
	require.Equal(t, int64(1), count(t, b, &models.Operation{}), "the record went to b")
	require.Zero(t, count(t, e.db, &models.Operation{}), "and not to A")

	ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, ops, 1)
	f := repository.FenceOf(&ops[0])
	_, err = repo.HeartbeatOperation(c, f, 2*time.Minute)
	require.NoError(t, err, "the heartbeat's UPDATE must reach b")
	_, err = repo.CommitOperation(c, repository.CommitParams{Fence: f, DocumentID: models.StrPtr("d")})
	require.NoError(t, err, "the commit's UPDATE must reach b")
	var got models.Operation
	require.NoError(t, b.First(&got).Error)
	require.Equal(t, models.OperationCommitted, got.State)
}
