package sqliteconn

import (
	"context"
	"errors"
	"time"

	"github.com/mattn/go-sqlite3"
)

// isBusy reports SQLite's "the write lock is taken" errors.
func isBusy(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && (e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked)
}

// retryBusy runs op until it does not fail busy or ctx ends. Within one
// process the write slot means op meets a busy lock only when another
// process (or a handle not opened by Open) holds it; SQLite's own busy
// timeout is short (lockPoll) because no context can interrupt it, and the
// wait goes on here, where one can. A context that ended is reported as its
// own error, not as "database is locked".
func retryBusy[T any](ctx context.Context, op func() (T, error)) (T, error) {
	backoff := time.Millisecond
	for {
		v, err := op()
		if err == nil || !isBusy(err) {
			return v, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}
