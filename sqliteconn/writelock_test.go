package sqliteconn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// queued waits until n callers wait for l.
func queued(t *testing.T, l *writeLock, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiters) == n
	}, 5*time.Second, time.Millisecond)
}

// TestWriteLockFIFO: waiters get the slot in the order they asked for it.
func TestWriteLockFIFO(t *testing.T) {
	var l writeLock
	require.NoError(t, l.lock(context.Background()))
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			require.NoError(t, l.lock(context.Background()))
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.unlock()
		})
		queued(t, &l, i+1)
	}
	l.unlock()
	wg.Wait()
	want := make([]int, 20)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, order)
	require.False(t, l.held)
}

// TestWriteLockContext: a wait ends with the context's error and leaves
// the queue; the slot passes over it to the next waiter.
func TestWriteLockContext(t *testing.T) {
	var l writeLock
	require.NoError(t, l.lock(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.lock(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)
	queued(t, &l, 0)

	got := make(chan error, 1)
	go func() { got <- l.lock(context.Background()) }()
	queued(t, &l, 1)
	l.unlock()
	require.NoError(t, <-got)
	l.unlock()
	require.False(t, l.held)
}

// TestWriteLockCancelWhileGranted: a waiter whose context ends as the slot
// is handed to it passes the slot on; hundreds of such races leave the
// slot free, never held by nobody.
func TestWriteLockCancelWhileGranted(t *testing.T) {
	var l writeLock
	for range 500 {
		require.NoError(t, l.lock(context.Background()))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.lock(ctx) }()
		queued(t, &l, 1)
		go cancel()
		l.unlock()
		if err := <-done; err == nil {
			l.unlock()
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, l.lock(ctx), "the slot leaked to a cancelled waiter")
	l.unlock()
}
