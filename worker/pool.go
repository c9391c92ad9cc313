package worker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/connstore/connstore/repository"
)

// ErrAlreadyRunning is returned by Run while another Run of the same pool
// has not returned: two loops would each hold leases the other heartbeats
// and records as its own.
var ErrAlreadyRunning = errors.New("connstore worker: pool is already running")

// Stats counts what a pool did. The recorded outcomes (Committed, Retried,
// Dead, ReconcileOnly, Snoozed, Released) count operations whose write
// landed; Refused, Panicked and TimedOut count causes, each also counted
// in the outcome it became; LeaseLost counts operations whose lease was
// really lost (a heartbeat or a result refused for the lease), never one
// the pool itself ended; Unrecorded counts results Run gave up recording
// at shutdown.
type Stats struct {
	// Claimed is the operations leased.
	Claimed int64
	// Committed is the commits recorded.
	Committed int64
	// Retried is the failed attempts recorded with a next attempt.
	Retried int64
	// Dead is the operations ended dead: by the handler, by the backoff
	// after a failed attempt, or as a refused commit.
	Dead int64
	// ReconcileOnly is the operations ended reconcile-only.
	ReconcileOnly int64
	// Snoozed is the operations put off without counting an attempt.
	Snoozed int64
	// Released is the leases given back at shutdown, unattempted.
	Released int64
	// Refused is the handler results the store would refuse (recorded per
	// the rule in Pool's doc).
	Refused int64
	// LeaseLost is the operations whose lease was lost while held.
	LeaseLost int64
	// Panicked is the handlers that panicked.
	Panicked int64
	// TimedOut is the handlers that passed their timeout.
	TimedOut int64
	// Unrecorded is the results not recorded when Run gave up at shutdown.
	Unrecorded int64
	// Wakeups is the times a recorded operation woke an idle pool.
	Wakeups int64
	// Throttled is the claims that found work only behind accounts'
	// limits (flow control): the pool was gated, not idle, and slept until
	// the next account could be served rather than a whole poll.
	Throttled int64
	// PausedAccounts is the account pauses its handlers reported
	// (PauseAccount results recorded).
	PausedAccounts int64
}

// counters are a pool's Stats as they accumulate.
type counters struct {
	claimed, committed, retried, dead, reconcileOnly, snoozed, released atomic.Int64
	refused, leaseLost, panicked, timedOut, unrecorded, wakeups         atomic.Int64
	throttled, pausedAccounts                                           atomic.Int64
}

// Pool is a re-drive worker pool; see the package doc.
//
// Every handler result is checked when the handler returns, with the
// store's own validation (and the claimed row's document id). A result the
// store would refuse is that operation's own outcome, logged at Error with
// its key, and never holds up the rest of its batch: a refused commit ends
// the operation dead (its write may have landed, so it is not re-driven),
// any other refused result is a failed attempt of kind invalid_result.
type Pool struct {
	repo    *repository.Repository
	cfg     Config
	stats   counters
	running atomic.Bool
}

// New returns a pool on repo, or ErrInvalidInput (wrapped, naming every
// problem) for a configuration that cannot work: no handler, a negative
// count or duration, a heartbeat longer than half the lease.
func New(repo *repository.Repository, cfg Config) (*Pool, error) {
	if repo == nil {
		return nil, fmt.Errorf("worker: %w: a repository is required", repository.ErrInvalidInput)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pool{repo: repo, cfg: cfg}, nil
}

// Stats returns the pool's counters so far.
func (p *Pool) Stats() Stats {
	s := &p.stats
	return Stats{Claimed: s.claimed.Load(), Committed: s.committed.Load(), Retried: s.retried.Load(),
		Dead: s.dead.Load(), ReconcileOnly: s.reconcileOnly.Load(), Snoozed: s.snoozed.Load(),
		Released: s.released.Load(), Refused: s.refused.Load(), LeaseLost: s.leaseLost.Load(),
		Panicked: s.panicked.Load(), TimedOut: s.timedOut.Load(), Unrecorded: s.unrecorded.Load(),
		Wakeups: s.wakeups.Load(), Throttled: s.throttled.Load(), PausedAccounts: s.pausedAccounts.Load()}
}
