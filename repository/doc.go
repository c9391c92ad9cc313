// Package repository is the connstore store API: sync state updated by
// compare-and-swap, the operations journal, projection watches and relist
// sweeps. It validates input, owns transactions, and builds every query from
// package scopes, with writes guarded by package hooks.
//
// Setup is three lines:
//
//	db.Use(hooks.New(hooks.Config{}))
//	migrations.Migrate(ctx, db)
//	repo, err := repository.New(db, repository.Options{})
package repository
