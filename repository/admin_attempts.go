package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
)

// OperationAttempts returns the operation's attempt history, newest first:
// each answer the journal recorded as its last one (failures, pauses on
// the provider's throttling, an end as dead or reconcile-only, a cancel),
// the newest models.AttemptHistoryLimit of them; a commit adds none. The
// operation must be visible within the repository's scopes (the history
// table has no owner of its own, so it is read only for an operation the
// scoped read found): a missing one is ErrNotFound. Both reads go to the
// primary, so a history read after a write shows it.
func (r *Repository) OperationAttempts(ctx context.Context, k OperationKey) (_ []models.OperationAttempt, err error) {
	ctx, end := r.start(ctx, "OperationAttempts")
	defer end(&err)
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("operation attempts: %w", err)
	}
	if _, err := r.getOperation(ctx, k); err != nil {
		return nil, fmt.Errorf("operation attempts: %w", err)
	}
	var rows []models.OperationAttempt
	err = r.base(ctx).Clauses(toPrimary{}).Scopes(scopes.Caller(k.CallerDID), scopes.Eq("operation_id", k.OperationID)).
		Order("id DESC").Limit(models.AttemptHistoryLimit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("operation attempts %s: %w", k, err)
	}
	return rows, nil
}
