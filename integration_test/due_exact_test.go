package integrationtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestDueSweepExactUnderWrites: watches that move between the SCHEDULE and
// the AUDIT branch while the sweep runs (moved from inside the winner reader,
// so the interleaving is exact) are each returned once: never twice, never
// skipped.
func TestDueSweepExactUnderWrites(t *testing.T) {
	t.Parallel()
	d := models.StrPtr("d")
	cases := []struct {
		name     string
		from, to map[string]any // w* columns before and after the move
	}{
		{"schedule to audit",
			map[string]any{"verification_status": models.WatchPendingVerification, "next_attempt_at": 1},
			map[string]any{"verification_status": models.WatchVerified, "verified_state_digest": "d", "next_attempt_at": nil}},
		{"audit to schedule",
			map[string]any{"verification_status": models.WatchVerified, "verified_state_digest": "d", "next_attempt_at": nil},
			map[string]any{"verification_status": models.WatchPendingVerification, "next_attempt_at": 1}},
	}
	forEachDB(t, func(t *testing.T, e *env) {
		for _, tc := range cases {
			require.NoError(t, e.db.Where("1 = 1").Delete(&models.ProjectionWatch{}).Error)
			var rows []models.ProjectionWatch
			for i := range 4 {
				rows = append(rows, watchRow(fmt.Sprintf("a%d", i), models.WatchVerified, nil, d, nil),
					watchRow(fmt.Sprintf("w%d", i), models.WatchVerified, nil, d, nil))
			}
			require.NoError(t, e.db.Create(&rows).Error)
			moveW := func(set map[string]any) {
				require.NoError(t, e.db.Model(&models.ProjectionWatch{}).Where("source_id LIKE ?", "w%").Updates(set).Error)
			}
			moveW(tc.from)
			var once sync.Once
			reader := func(_ context.Context, ids []string) (map[string]string, error) {
				once.Do(func() { moveW(tc.to) }) // between the sweep's reads
				out := map[string]string{}
				for _, id := range ids {
					out[id] = "moved"
				}
				return out, nil
			}
			work, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(),
				ReadWinners: reader, ChunkSize: 1, PageSize: 2})
			require.NoError(t, err)
			require.Equal(t, []string{"a0", "a1", "a2", "a3", "w0", "w1", "w2", "w3"}, sorted(sources(work.Watches)), tc.name)
		}
	})
}

// TestIterDueStreams: the streaming sweep yields operations then watches,
// stops reading when the consumer stops, and yields an error last.
func TestIterDueStreams(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		var ops []models.Operation
		var watches []models.ProjectionWatch
		for i := range 30 {
			ops = append(ops, dbtest.OpRow(i, models.OperationAttempted, nil, 1))
			watches = append(watches, watchRow(fmt.Sprintf("w%02d", i), models.WatchVerified, nil, models.StrPtr("d"), nil))
		}
		seedOps(t, e, ops)
		require.NoError(t, e.db.Create(&watches).Error)
		repo, rec := recordingRepo(t, e)
		moved := func(_ context.Context, ids []string) (map[string]string, error) {
			out := map[string]string{}
			for _, id := range ids {
				out[id] = "moved"
			}
			return out, nil
		}
		p := repository.DueParams{Now: e.clock.Now(), ReadWinners: moved, ChunkSize: 4, PageSize: 5}

		var kinds []repository.DueKind
		for it, err := range repo.IterDue(ctx(t), p) {
			require.NoError(t, err)
			kinds = append(kinds, it.Kind)
		}
		require.Len(t, kinds, 60)
		require.Equal(t, repository.DueRedrive, kinds[0])
		require.Equal(t, repository.DueDiverged, kinds[59])
		for _, stmt := range rec.take() {
			require.Contains(t, stmt, "LIMIT 5", "every read is one page: %s", stmt)
		}

		n := 0
		for range repo.IterDue(ctx(t), p) {
			if n++; n == 3 {
				break
			}
		}
		require.Len(t, rec.take(), 1, "stopping after 3 items reads no further page")

		boom := errors.New("winner store down")
		p.ReadWinners = func(context.Context, []string) (map[string]string, error) { return nil, boom }
		var last error
		items := 0
		for _, err := range repo.IterDue(ctx(t), p) {
			if err != nil {
				last = err
				continue
			}
			items++
		}
		require.ErrorIs(t, last, boom)
		require.Equal(t, 30, items, "the operations came before the failing audit chunk")

		_, err := repo.ListDueOperations(ctx(t), repository.DueParams{})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.True(t, strings.HasPrefix(err.Error(), "list due operations:"), err.Error())
	})
}
