package integrationtest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// traceRec keeps every traced statement with its rows and error.
type traceRec struct {
	logger.Interface
	mu      sync.Mutex
	entries []traceEntry
}

type traceEntry struct {
	sql  string
	rows int64
	err  error
}

func (r *traceRec) LogMode(logger.LogLevel) logger.Interface { return r }

func (r *traceRec) Trace(_ context.Context, _ time.Time, fc func() (string, int64), err error) {
	sql, rows := fc()
	r.mu.Lock()
	r.entries = append(r.entries, traceEntry{sql, rows, err})
	r.mu.Unlock()
}

func (r *traceRec) updates() []traceEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []traceEntry
	for _, e := range r.entries {
		if isUpdate(e.sql) {
			out = append(out, e)
		}
	}
	return out
}

// TestRefusedWriteReachesLoggerAndTranslator: a lease holder's UPDATE the
// database refuses (here a CHECK constraint the application added to the
// journal) is reported to the application's gorm logger with its error,
// once, and, with TranslateError, as gorm's translated error: the write
// runs through gorm's own update chain, not beside it.
func TestRefusedWriteReachesLoggerAndTranslator(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{pgKind, sqlitekind} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := setup(t, kind)
			c := ctx(t)
			_, _, err := e.repo.RecordOperation(c, opInput("caller", "op"))
			require.NoError(t, err)
			ops, err := e.repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			limit := *ops[0].LeaseExpiresAt
			if kind == pgKind {
				require.NoError(t, e.db.Exec("ALTER TABLE kubun_connector_operation ADD CONSTRAINT lease_cap CHECK (lease_expires_at <= "+itoa(limit)+")").Error)
			} else {
				require.NoError(t, e.db.Exec(`CREATE TRIGGER lease_cap BEFORE UPDATE ON kubun_connector_operation
					WHEN NEW.lease_expires_at > `+itoa(limit)+` BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: lease_cap'); END`).Error)
			}

			rec := &traceRec{Interface: logger.Discard}
			db := e.db.Session(&gorm.Session{Logger: rec})
			db.Config.TranslateError = true
			repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
			require.NoError(t, err)
			_, err = repo.HeartbeatOperation(c, repository.FenceOf(&ops[0]), 5*time.Minute)
			require.Error(t, err, "the database refused the heartbeat")
			t.Logf("heartbeat error: %v", err)
			ups := rec.updates()
			require.Len(t, ups, 1, "the logger sees the UPDATE once")
			require.Error(t, ups[0].err, "the logger sees the UPDATE's error (got rows=%d, err=nil)", ups[0].rows)
			if kind == pgKind { // SQLite's RAISE in a trigger is not a CHECK constraint to translate
				require.True(t, errors.Is(err, gorm.ErrCheckConstraintViolated), "TranslateError translates it: %v", err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
