package integrationtest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// pauseKey marks a call's context with the gate its UPDATE waits at.
type pauseKey struct{}

// gate holds a call after its UPDATE has run and before the repository
// goes on (to remember what it wrote): reached is closed once the UPDATE
// ran, and the call waits until release is closed.
type gate struct{ reached, release chan struct{} }

func newGate() *gate { return &gate{reached: make(chan struct{}), release: make(chan struct{})} }

// pausingLogger is a gorm logger whose Trace, called once a statement has
// run, holds an UPDATE made under a context carrying a *gate.
type pausingLogger struct{ logger.Interface }

func (l pausingLogger) LogMode(logger.LogLevel) logger.Interface { return l }

func (l pausingLogger) Trace(ctx context.Context, _ time.Time, fc func() (string, int64), _ error) {
	g, ok := ctx.Value(pauseKey{}).(*gate)
	if !ok {
		return
	}
	if sql, _ := fc(); strings.HasPrefix(sql, "UPDATE") {
		close(g.reached)
		<-g.release
	}
}

// TestProgressCacheNeverGoesBack is issue 37's sequence made deterministic,
// on one repository (one cache): B's write to v2 commits and B is held
// before it remembers it; A reads v2 and writes v3 and is held too; B then
// remembers v2, and A's remembering of v3 is refused. A's next recompute
// must see v3 or later, never B's v2. (It failed when a refused remember
// left the older entry in the cache.)
func TestProgressCacheNeverGoesBack(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, err := repository.New(e.db.Session(&gorm.Session{Logger: pausingLogger{logger.Discard}}), repository.Options{})
		require.NoError(t, err)
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		// v0 and v1 by another repository: this cache holds nothing of the row.
		other := realRepo(t, e)
		for range 2 {
			require.NoError(t, other.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{Key: key, Recompute: counterRecompute(nil)}))
		}

		update := func(g *gate, seen *[]int64) <-chan error {
			done := make(chan error, 1)
			c := ctx(t)
			if g != nil {
				c = context.WithValue(c, pauseKey{}, g)
			}
			go func() {
				done <- repo.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{Key: key,
					Recompute: counterRecompute(func(cur *repository.SyncProgressCurrent) { *seen = append(*seen, cur.Version) })})
			}()
			return done
		}
		var seenA, seenB []int64
		b, a := newGate(), newGate()
		doneB := update(b, &seenB)
		<-b.reached // B wrote v2
		doneA := update(a, &seenA)
		<-a.reached // A read v2 and wrote v3
		close(b.release)
		require.NoError(t, <-doneB) // B remembers v2
		close(a.release)
		require.NoError(t, <-doneA) // A's remembering of v3 is refused
		require.Equal(t, []int64{1}, seenB)
		require.Equal(t, []int64{2}, seenA)

		require.NoError(t, <-update(nil, &seenA))
		require.Equal(t, []int64{2, 3}, seenA, "A's next recompute saw a state older than A's own write (v3)")
	})
}

// TestProgressMonotonicReads: eight goroutines update one row through one
// repository (default options, cache on), 2,000 updates in all; every
// recompute a goroutine is handed shows a version at least the one that
// goroutine's previous update wrote, and no update is lost.
func TestProgressMonotonicReads(t *testing.T) {
	t.Parallel()
	const workers, updates = 8, 2000
	forEachDB(t, func(t *testing.T, e *env) {
		repo := realRepo(t, e)
		key := repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}
		retries := 1 << 20
		var behind, attempts atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for w := range workers {
			wg.Go(func() {
				acked := int64(-1) // the version this goroutine's last update wrote
				for range updates / workers {
					var last int64
					err := repo.UpdateSyncProgress(context.Background(), repository.UpdateSyncProgressParams{Key: key, MaxRetries: &retries,
						Recompute: counterRecompute(func(cur *repository.SyncProgressCurrent) {
							attempts.Add(1)
							last = 0 // the insert writes v0
							if cur != nil {
								if cur.Version < acked {
									behind.Add(1)
								}
								last = cur.Version + 1
							}
						})})
					if err != nil {
						errs[w] = err
						return
					}
					acked = last
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Zero(t, behind.Load(), "recomputes handed a version older than their caller's last write")
		got, err := repo.GetSyncState(ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, int64(updates), got.EntityCount, "no update lost")
		t.Logf("%s: %d attempts for %d updates", e.kind, attempts.Load(), updates)
	})
}

// TestProgressCacheForgetsWritesItDoesNotRemember: an update in a caller's
// transaction, or through a scoped copy, shares the repository's cache but
// does not remember what it wrote; it must forget the row, or the next
// plain update recomputes from the state before it. (Both failed when
// those writes left the cache as it was.)
func TestProgressCacheForgetsWritesItDoesNotRemember(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		write func(t *testing.T, repo *repository.Repository, p repository.UpdateSyncProgressParams) error
	}{
		{"in a caller's transaction", func(t *testing.T, repo *repository.Repository, p repository.UpdateSyncProgressParams) error {
			return repo.Transaction(ctx(t), func(_ *gorm.DB, tx *repository.Repository) error { return tx.UpdateSyncProgress(ctx(t), p) })
		}},
		{"through a scoped copy", func(t *testing.T, repo *repository.Repository, p repository.UpdateSyncProgressParams) error {
			scoped, err := repo.WithScopes(ctx(t), scopes.Owner("o"))
			if err != nil {
				return err
			}
			return scoped.UpdateSyncProgress(ctx(t), p)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, e *env) {
				repo := realRepo(t, e)
				var seen []int64
				p := repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
					Recompute: counterRecompute(func(cur *repository.SyncProgressCurrent) {
						if cur != nil {
							seen = append(seen, cur.Version)
						}
					})}
				require.NoError(t, repo.UpdateSyncProgress(ctx(t), p)) // v0, remembered
				require.NoError(t, repo.UpdateSyncProgress(ctx(t), p)) // v1, remembered
				require.NoError(t, tc.write(t, repo, p))               // v2, acknowledged
				seen = nil
				require.NoError(t, repo.UpdateSyncProgress(ctx(t), p))
				require.Equal(t, []int64{2}, seen, "the next recompute is handed the state before the acknowledged v2")
			})
		})
	}
}
