package repository

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The statement settings gorm.io/plugin/dbresolver reads to pick a source
// or a replica, and the name of its resolving callback.
const (
	resolverWrite    = "gorm:db_resolver:write"
	resolverRead     = "gorm:db_resolver:read"
	resolverCallback = "gorm:db_resolver"
)

// toPrimary is what the plugin's dbresolver.Write clause does, without
// importing the plugin: it marks the statement for a source (the primary)
// and lets the plugin's resolver, when the application registered it,
// choose again; without the plugin it does nothing. connstore does not
// import dbresolver because its module requires the MySQL driver (for the
// plugin's own tests), which would then appear in every user's module
// graph. The contract is pinned against the real plugin:
// TestPrimaryRouteIsDBResolverWrite here, and the integration tests that
// route through the plugin with a replica lagging or down
// (TestReadReplicaRouting, TestScopedWritesWithReplicaDown,
// TestWritesFollowANamedResolver).
type toPrimary struct{}

// ModifyStatement implements gorm.StatementModifier.
func (toPrimary) ModifyStatement(stmt *gorm.Statement) {
	stmt.Settings.Delete(resolverRead)
	stmt.Settings.Store(resolverWrite, struct{}{})
	if resolve := stmt.DB.Callback().Query().Get(resolverCallback); resolve != nil {
		resolve(stmt.DB)
	}
}

// Build implements clause.Expression: the clause writes no SQL.
func (toPrimary) Build(clause.Builder) {}
