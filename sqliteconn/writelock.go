package sqliteconn

import (
	"context"
	"sync"
)

// writeLock is the process's one write slot for a database file: a mutex
// whose waiters are served in arrival order and whose wait ends with the
// caller's context. SQLite lets one connection write at a time; taking the
// slot here, before a statement reaches SQLite, means two of our own
// connections never meet in SQLite's lock, where the loser gets "database
// is locked" and no context can interrupt the wait.
type writeLock struct {
	mu      sync.Mutex
	held    bool
	waiters []*waiter
}

// waiter is one caller queued for the slot; granted is set (under mu) when
// the slot is handed to it, so a caller whose context ends at that moment
// knows it owns the slot and must pass it on.
type waiter struct {
	ready   chan struct{}
	granted bool
}

// lock takes the slot, waiting behind earlier callers; it returns the
// context's error, holding nothing, if ctx ends first.
func (l *writeLock) lock(ctx context.Context) error {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if w.granted {
		// Handed over as the context ended: pass it on, not leak it.
		l.unlockLocked()
	} else {
		for i, o := range l.waiters {
			if o == w {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				break
			}
		}
	}
	l.mu.Unlock()
	return ctx.Err()
}

// unlock hands the slot to the longest waiter, or frees it.
func (l *writeLock) unlock() {
	l.mu.Lock()
	l.unlockLocked()
	l.mu.Unlock()
}

func (l *writeLock) unlockLocked() {
	if len(l.waiters) == 0 {
		l.held = false
		return
	}
	w := l.waiters[0]
	l.waiters[0] = nil
	l.waiters = l.waiters[1:]
	w.granted = true
	close(w.ready)
}
