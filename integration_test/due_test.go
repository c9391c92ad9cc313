package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func watchRow(source, status string, next *int64, verified, observed *string) models.ProjectionWatch {
	return models.ProjectionWatch{OwnerDID: "owner", ConnectorName: "crm", Model: "m", AccountKey: "a",
		SourceID: source, DocumentID: "doc-" + source, VerificationStatus: status, NextAttemptAt: next,
		VerifiedStateDigest: verified, ObservedWinnerDigest: observed, CreatedAt: 1, UpdatedAt: 1}
}

func sources(ws []models.ProjectionWatch) []string {
	out := make([]string, len(ws))
	for i := range ws {
		out[i] = ws[i].SourceID
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// TestListDueFilters: rows × now values, for operations and both watch
// branches, with both winner readers.
func TestListDueFilters(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		now := e.clock.Now()
		past, at, soon := ms(now.Add(-time.Second)), ms(now), ms(now.Add(2*time.Second))
		d, x, y := models.StrPtr("d"), models.StrPtr("x"), models.StrPtr("y")
		ops := []models.Operation{
			dbtest.OpRow(1, models.OperationAttempted, nil, 1), dbtest.OpRow(2, models.OperationAttempted, past, 1),
			dbtest.OpRow(3, models.OperationAttempted, at, 1), dbtest.OpRow(4, models.OperationAttempted, soon, 1),
			dbtest.OpRow(5, models.OperationCommitted, nil, 1), dbtest.OpRow(6, models.OperationDead, past, 1),
			dbtest.OpRow(7, models.OperationReconcileOnly, nil, 1), dbtest.OpRow(8, models.OperationAttempted, past, 1),
		}
		ops[7].LeaseToken, ops[7].LeaseExpiresAt = models.StrPtr("held"), soon // leased rows are still listed
		seedOps(t, e, ops)
		watches := []models.ProjectionWatch{
			watchRow("w01", models.WatchPendingVerification, past, nil, nil), // SCHEDULE
			watchRow("w02", models.WatchPendingVerification, soon, nil, nil), // SCHEDULE later
			watchRow("w03", models.WatchPendingVerification, nil, nil, nil),  // neither branch
			watchRow("w04", models.WatchVerified, nil, d, nil),               // winner unchanged
			watchRow("w05", models.WatchVerified, nil, d, nil),               // winner moved: AUDIT
			watchRow("w06", models.WatchVerified, nil, d, x),                 // winner = observed
			watchRow("w07", models.WatchRepairFailed, nil, nil, x),           // K-bounded negative
			watchRow("w08", models.WatchRepairFailed, nil, nil, x),           // winner moved: AUDIT
			watchRow("w09", models.WatchRepairFailed, at, nil, x),            // both branches: once
			watchRow("w10", models.WatchVerified, nil, d, nil),               // unreadable winner
			watchRow("w11", models.WatchVerified, past, d, nil),              // verified never SCHEDULE
			watchRow("w12", models.WatchRepairFailed, soon, nil, x),          // unmoved, scheduled later
		}
		require.NoError(t, e.db.Create(&watches).Error)
		winners := map[string]string{"doc-w04": "d", "doc-w05": "x", "doc-w06": "x", "doc-w07": "x",
			"doc-w08": "y", "doc-w09": "y", "doc-w11": "d", "doc-w12": "x", "doc-w01": "z", "doc-w03": "z"}
		_ = y
		batch := func(_ context.Context, ids []string) (map[string]string, error) {
			out := map[string]string{}
			for _, id := range ids {
				if w, ok := winners[id]; ok {
					out[id] = w
				}
			}
			return out, nil
		}
		single := func(_ context.Context, id string) (string, bool, error) {
			if id == "doc-w10" {
				return "", false, errors.New("no winner stored") // skipped, not fatal
			}
			w, ok := winners[id]
			return w, ok, nil
		}
		cases := []struct {
			now        time.Time
			ops, sched []string
			audit      []string
		}{
			{now.Add(-2 * time.Second), []string{"op-000001"}, nil, []string{"w05", "w08", "w09"}},
			{now, []string{"op-000001", "op-000002", "op-000003", "op-000008"}, []string{"w01", "w09"}, []string{"w05", "w08"}},
			{now.Add(2 * time.Second), []string{"op-000001", "op-000002", "op-000003", "op-000004", "op-000008"},
				[]string{"w01", "w02", "w09", "w12"}, []string{"w05", "w08"}},
		}
		for i, tc := range cases {
			for name, p := range map[string]repository.DueParams{
				"batch":  {Now: tc.now, ReadWinners: batch, ChunkSize: 3, PageSize: 2},
				"single": {Now: tc.now, ReadWinner: single, PageSize: 2},
			} {
				work, err := e.repo.ListDueOperations(ctx(t), p)
				require.NoError(t, err)
				require.Equal(t, tc.ops, ids(work.Operations), "case %d %s", i, name)
				want := append(append([]string{}, tc.sched...), tc.audit...)
				got := sources(work.Watches)
				require.Equal(t, want, append(sorted(got[:len(tc.sched)]), sorted(got[len(tc.sched):])...),
					"case %d %s: SCHEDULE rows first, then AUDIT, each once", i, name)
			}
		}
	})
}

func TestListDueReadWinnersErrorAborts(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		require.NoError(t, e.db.Create(ptr(watchRow("w1", models.WatchVerified, nil, models.StrPtr("d"), nil))).Error)
		boom := errors.New("store down")
		_, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(),
			ReadWinners: func(context.Context, []string) (map[string]string, error) { return nil, boom }})
		require.ErrorIs(t, err, boom)
	})
}

func ptr[T any](v T) *T { return &v }

// TestListDueReadWinnersChunks: n audit candidates cost ceil(n/chunk)
// ReadWinners calls, never one per watch, and each chunk is at most chunk.
func TestListDueReadWinnersChunks(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		const verified, failed, chunk = 700, 534, 100
		var rows []models.ProjectionWatch
		for i := range verified + failed + 50 {
			status := models.WatchVerified
			if i >= verified {
				status = models.WatchRepairFailed
			}
			if i >= verified+failed {
				status = models.WatchPendingVerification // not an audit candidate
			}
			rows = append(rows, watchRow(fmt.Sprintf("s%05d", i), status, nil, models.StrPtr("d"), nil))
		}
		require.NoError(t, e.db.CreateInBatches(rows, 400).Error)
		var calls, seen atomic.Int64
		reader := func(_ context.Context, ids []string) (map[string]string, error) {
			calls.Add(1)
			seen.Add(int64(len(ids)))
			if len(ids) > chunk {
				return nil, fmt.Errorf("chunk of %d", len(ids))
			}
			out := map[string]string{}
			for _, id := range ids {
				out[id] = "d"
			}
			return out, nil
		}
		work, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(), ReadWinners: reader, ChunkSize: chunk, PageSize: 64})
		require.NoError(t, err)
		require.Empty(t, work.Watches)
		require.Equal(t, int64((verified+failed+chunk-1)/chunk), calls.Load())
		require.Equal(t, int64(verified+failed), seen.Load())
	})
}
