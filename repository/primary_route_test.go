package repository

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"
)

// TestPrimaryRouteIsDBResolverWrite: toPrimary leaves a statement marked as
// the plugin's own Write clause does (a source, not a replica), also where
// the statement was marked for a replica first, and runs the plugin's
// resolver again as the plugin's clause does.
func TestPrimaryRouteIsDBResolverWrite(t *testing.T) {
	db, err := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{Logger: logger.Discard, DryRun: true})
	require.NoError(t, err)
	resolved := 0
	require.NoError(t, db.Callback().Query().Register(resolverCallback, func(*gorm.DB) { resolved++ }))
	settings := func(c clause.Expression) map[any]any {
		stmt := db.Clauses(dbresolver.Read).Clauses(c).Statement
		out := map[any]any{}
		stmt.Settings.Range(func(k, v any) bool { out[k] = v; return true })
		return out
	}
	theirs := settings(dbresolver.Write)
	require.Contains(t, theirs, resolverWrite, "the plugin still marks writes under this name")
	require.NotContains(t, theirs, resolverRead)
	before := resolved
	require.Equal(t, theirs, settings(toPrimary{}))
	require.Equal(t, 2, resolved-before, "the resolver ran for the read mark and for ours")
}
