package integrationtest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// recordingObserver keeps every call and event, and when each event came.
type recordingObserver struct {
	mu     sync.Mutex
	calls  []string
	events []repository.Event
	at     []time.Time
}

func (o *recordingObserver) Begin(ctx context.Context, method string) (context.Context, func(error)) {
	o.mu.Lock()
	o.calls = append(o.calls, method)
	o.mu.Unlock()
	return ctx, func(error) {}
}

func (o *recordingObserver) Observe(_ context.Context, e repository.Event) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.at = append(o.at, time.Now())
	o.mu.Unlock()
}

// firstAt is when the first event of kind came (zero if none did).
func (o *recordingObserver) firstAt(kind repository.EventKind) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, e := range o.events {
		if e.Kind == kind {
			return o.at[i]
		}
	}
	return time.Time{}
}

func (o *recordingObserver) take() []repository.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.events
	o.events, o.at = nil, nil
	return out
}

// countEvents is how many of events are of kind.
func countEvents(events []repository.Event, kind repository.EventKind) (n int) {
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// recordingHandler is an in-memory slog handler.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) kinds() map[string]slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]slog.Level{}
	for _, r := range h.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "kind" {
				out[a.Value.String()] = r.Level
			}
			return true
		})
	}
	return out
}

// TestObserverAndLogEvents: a forced CAS loss, a lost lease, a claim and a
// collection each reach the Observer and the slog logger.
func TestObserverAndLogEvents(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		obs, h := &recordingObserver{}, &recordingHandler{}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next,
			Observer: obs, Logger: slog.New(h)})
		require.NoError(t, err)
		c := ctx(t)

		require.NoError(t, repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
		first := true
		require.NoError(t, repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
			Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				if first {
					first = false
					require.NoError(t, e.db.Model(&models.SyncState{}).Where("owner_did = ?", "o").Update("entity_count", 3).Error)
				}
				return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 1}, nil
			}}))
		require.Contains(t, obs.take(), repository.Event{Kind: repository.EventCASRetry, Method: "UpdateSyncProgress", Count: 1})

		recordOp(t, e, "caller", "op")
		ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 5, LeaseFor: time.Second})
		require.NoError(t, err)
		require.Contains(t, obs.take(), repository.Event{Kind: repository.EventClaimed, Method: "ClaimOperations", Count: 1})
		e.clock.Advance(time.Minute)
		_, err = repo.CommitOperation(c, repository.CommitParams{Fence: repository.FenceOf(&ops[0])})
		require.ErrorIs(t, err, repository.ErrLeaseLost)
		require.Contains(t, obs.take(), repository.Event{Kind: repository.EventLeaseLost, Method: "CommitOperation",
			Count: 1, Reason: repository.LeaseLostExpired})

		seedOps(t, e, []models.Operation{dbtest.OpRow(1, models.OperationCommitted, nil, 1)})
		n, err := repo.CollectFinishedOperations(c, repository.CollectParams{Before: e.clock.Now(), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Contains(t, obs.take(), repository.Event{Kind: repository.EventCollected, Method: "CollectFinishedOperations", Count: 1})

		require.Equal(t, map[string]slog.Level{"cas_retry": slog.LevelDebug, "claimed": slog.LevelDebug,
			"lease_lost": slog.LevelInfo, "collected": slog.LevelInfo}, h.kinds())
		require.Contains(t, obs.calls, "UpdateSyncProgress")
		require.Equal(t, []string{"SetSyncState", "UpdateSyncProgress", "ClaimOperations", "CommitOperation",
			"CollectFinishedOperations"}, obs.calls, "one observed call per public call: the refused commit's explanation is no nested GetOperation")
	})
}
