package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/scopes"
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
// running them once, on the primary, against a probe row, and refuses any
// other scope with ErrInvalidInput. A probe that fails without the scopes
// too (the database is unreachable, ctx ended) is that failure, not
// ErrInvalidInput.
func (r *Repository) WithScopes(ctx context.Context, s ...scopes.Scope) (*Repository, error) {
	if r.err != nil {
		return nil, fmt.Errorf("with scopes: %w", r.err)
	}
	for i, sc := range s {
		if sc == nil {
			return nil, fmt.Errorf("with scopes: %w", invalid("scope %d is nil", i))
		}
	}
	cp := *r
	cp.scopes = append(append([]scopes.Scope(nil), r.scopes...), s...)
	_, err := cp.admitted(ctx, []scopeKey{{}})
	if err == nil {
		return &cp, nil
	}
	bare := *r
	bare.scopes = nil
	if _, bareErr := bare.admitted(ctx, []scopeKey{{}}); bareErr != nil {
		return nil, fmt.Errorf("with scopes: %w", bareErr)
	}
	return nil, fmt.Errorf("with scopes: %w: scopes may name only %s: %w", ErrInvalidInput, scopeColumns, err)
}

// scopeKey is the (owner, connector) a row would be created for.
type scopeKey struct{ owner, connector string }

// admitted returns which of keys the repository's scopes admit, in one
// statement on the primary (the decision is a write's): the keys travel as
// one row source (see jsonTable), filtered by the scopes as a table holding owner_did and
// connector_name.
func (r *Repository) admitted(ctx context.Context, keys []scopeKey) (map[scopeKey]bool, error) {
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = []any{k.owner, k.connector}
	}
	from, vars, err := jsonTableAs(r.dialect.Name(), "connstore_scope",
		[]jsonrows.Col{jsonrows.Text("owner_did"), jsonrows.Text("connector_name")}, rows)
	if err != nil {
		return nil, err
	}
	var found []struct {
		OwnerDID      string `gorm:"column:owner_did"`
		ConnectorName string `gorm:"column:connector_name"`
	}
	err = r.base(ctx).Clauses(toPrimary{}).Table(from, vars...).Select("owner_did", "connector_name").
		Scopes(r.scopes...).Find(&found).Error
	if err != nil {
		return nil, err
	}
	in := make(map[scopeKey]bool, len(found))
	for _, f := range found {
		in[scopeKey{f.OwnerDID, f.ConnectorName}] = true
	}
	return in, nil
}

// inScope refuses a key the repository's scopes exclude, before a write
// that would create a row for it.
func (r *Repository) inScope(ctx context.Context, owner, connector string) error {
	return r.allInScope(ctx, []scopeKey{{owner, connector}})
}

// allInScope refuses keys when any is outside the repository's scopes: one
// statement for a whole batch, whatever its size.
func (r *Repository) allInScope(ctx context.Context, keys []scopeKey) error {
	if len(r.scopes) == 0 || r.err != nil || len(keys) == 0 {
		return nil
	}
	in, err := r.admitted(ctx, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !in[k] {
			return fmt.Errorf("%w: %s/%s", ErrOutOfScope, k.owner, k.connector)
		}
	}
	return nil
}
