package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// scopeColumns are the columns every connstore table has; a repository's
// extra scopes may name only these, so that they mean the same on every
// table a call touches.
const scopeColumns = "owner_did and connector_name"

// WithScopes returns a repository that applies extra scopes (a tenant, a
// region, …) to every statement of every call, the raw-SQL ones included:
// reads, claims, fenced writes, sweeps and retention never see a row outside
// them. A call that would create or upsert a row outside them (a key whose
// owner or connector the scopes exclude) fails with ErrOutOfScope and writes
// nothing.
//
// The scopes may name only owner_did and connector_name, unqualified: those
// are the columns every connstore table shares. WithScopes checks that by
// running them once against a probe row, and refuses any other scope with
// ErrInvalidInput.
func (r *Repository) WithScopes(ctx context.Context, s ...scopes.Scope) (*Repository, error) {
	cp := *r
	cp.scopes = append(append([]scopes.Scope(nil), r.scopes...), s...)
	var rows []int
	if err := cp.probe(ctx, "", "").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("with scopes: %w: scopes may name only %s: %w", ErrInvalidInput, scopeColumns, err)
	}
	return &cp, nil
}

// probe selects one row from a one-row table holding owner and connector,
// filtered by the repository's scopes: a row exists iff the key is in scope.
func (r *Repository) probe(ctx context.Context, owner, connector string) *gorm.DB {
	return r.base(ctx).Table("(SELECT CAST(? AS TEXT) AS owner_did, CAST(? AS TEXT) AS connector_name) AS connstore_scope",
		owner, connector).Select("1").Scopes(r.scopes...).Limit(1)
}

// inScope refuses a key the repository's scopes exclude, before a write
// that would create a row for it.
func (r *Repository) inScope(ctx context.Context, owner, connector string) error {
	if len(r.scopes) == 0 || r.err != nil {
		return nil
	}
	var rows []int
	if err := r.probe(ctx, owner, connector).Find(&rows).Error; err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%w: %s/%s", ErrOutOfScope, owner, connector)
	}
	return nil
}
