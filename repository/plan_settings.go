package repository

import (
	"context"
	"strings"

	"gorm.io/gorm"
)

// planSetting is one PostgreSQL planner setting and the value a statement
// needs.
type planSetting struct{ name, value string }

// inCallerTx reports whether the repository runs in a caller's transaction
// (WithTx, Transaction), where a SET LOCAL would outlive its statement.
func (r *Repository) inCallerTx() bool {
	_, ok := r.db.Statement.ConnPool.(gorm.TxCommitter)
	return ok
}

// withPlanSettings runs fn in a transaction whose PostgreSQL planner
// settings are changed for fn only: in the repository's own transaction they
// end with it; in a caller's (a savepoint) they are put back after fn, so
// the caller's later statements plan as before (a failed fn's savepoint
// rollback puts them back by itself). On SQLite, which has no such
// settings, fn just runs in the transaction.
func (r *Repository) withPlanSettings(ctx context.Context, settings []planSetting, fn func(tx *gorm.DB) error) error {
	return r.base(ctx).Transaction(func(tx *gorm.DB) error {
		if !r.isPostgres() {
			return fn(tx)
		}
		// Every setting read and changed in one round trip.
		cols, vars := make([]string, len(settings)), make([]any, 0, 3*len(settings))
		for i, s := range settings {
			cols[i] = "current_setting(?), set_config(?, ?, true)"
			vars = append(vars, s.name, s.name, s.value)
		}
		old, set := make([]string, len(settings)), make([]string, len(settings))
		dest := make([]any, 0, 2*len(settings))
		for i := range settings {
			dest = append(dest, &old[i], &set[i])
		}
		if err := tx.Raw("SELECT "+strings.Join(cols, ", "), vars...).Row().Scan(dest...); err != nil {
			return err
		}
		if err := fn(tx); err != nil || !r.inCallerTx() {
			return err
		}
		for i, s := range settings {
			if err := tx.Exec("SELECT set_config(?, ?, true)", s.name, old[i]).Error; err != nil {
				return err
			}
		}
		return nil
	})
}
