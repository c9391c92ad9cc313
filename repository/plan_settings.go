package repository

import (
	"context"

	"github.com/connstore/connstore/internal/dialect"
	"gorm.io/gorm"
)

// inCallerTx reports whether the repository runs in a caller's transaction
// (WithTx, Transaction), where a SET LOCAL would outlive its statement.
func (r *Repository) inCallerTx() bool {
	_, ok := r.db.Statement.ConnPool.(gorm.TxCommitter)
	return ok
}

// withPlanSettings runs fn in a transaction whose planner settings are
// changed for fn only (see dialect.WithPlanSettings): in the repository's
// own transaction they end with it; in a caller's (a savepoint) they are
// put back after fn, so the caller's later statements plan as before (a
// failed fn's savepoint rollback puts them back by itself).
func (r *Repository) withPlanSettings(ctx context.Context, settings []dialect.Setting, fn func(tx *gorm.DB) error) error {
	restore := r.inCallerTx()
	return r.base(ctx).Transaction(func(tx *gorm.DB) error {
		return r.dialect.WithPlanSettings(tx, settings, restore, func() error { return fn(tx) })
	})
}
