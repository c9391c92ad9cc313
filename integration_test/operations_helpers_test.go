package integrationtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func opInput(caller, id string) repository.OperationInput {
	return repository.OperationInput{
		CallerDID: caller, OperationID: id, NodeKey: "node-" + id, OwnerDID: "owner", ConnectorName: "crm",
		Model: "contact", Op: "create", AccountKey: "acct", Target: "contacts", DeterministicEventID: "evt-" + id,
		PayloadHash: "hash-" + id, ReissueIntent: models.JSON(`{"op":"create"}`),
	}
}

func recordOp(t *testing.T, e *env, caller, id string) *models.Operation {
	t.Helper()
	op, created, err := e.repo.RecordOperation(ctx(t), opInput(caller, id))
	require.NoError(t, err)
	require.True(t, created)
	return op
}

// seedOps inserts a copy of rows: gorm writes defaults and the lock back
// into what it inserts, and parallel subtests share one case table. On a
// journal rolled back before migration 0021 (the upgrade tests) it writes
// the rows as a binary of that time would, without their weight.
func seedOps(t *testing.T, e *env, rows []models.Operation) {
	t.Helper()
	q := e.db
	var missing []string // gorm's Omit replaces, so one call
	for _, col := range []string{"weight", "last_message", "last_answer_at"} {
		if !e.db.Migrator().HasColumn(&models.Operation{}, col) {
			missing = append(missing, col)
		}
	}
	if len(missing) > 0 {
		q = q.Omit(missing...)
	}
	require.NoError(t, q.CreateInBatches(slices.Clone(rows), 500).Error)
}

func ms(t time.Time) *int64 { v := t.UnixMilli(); return &v }

// snapshot reads an operation for before/after comparison.
func snapshot(t *testing.T, e *env, caller, id string) models.Operation {
	t.Helper()
	op, err := e.repo.GetOperation(ctx(t), repository.OperationKey{CallerDID: caller, OperationID: id})
	require.NoError(t, err)
	return *op
}

// noWinners is a batch winner reader that finds no winner at all.
func noWinners(context.Context, []string) (map[string]string, error) { return nil, nil }
