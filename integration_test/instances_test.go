package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// instance is a second application instance on e's database: its own
// handle (its own pool), its own plugin and its own repository, sharing
// nothing in memory with e.
func instance(t *testing.T, e *env, opts repository.Options) (*gorm.DB, *repository.Repository) {
	t.Helper()
	db := openDSN(t, e.kind, e.dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
	if opts.NowFunc == nil {
		opts.NowFunc = e.clock.Now
	}
	if opts.NewIDFunc == nil {
		opts.NewIDFunc = e.ids.Next
	}
	repo, err := repository.New(db, opts)
	require.NoError(t, err)
	return db, repo
}
