package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// Config tunes a Pool; only Handler is required.
type Config struct {
	// Handler performs each operation; required.
	Handler Handler
	// Concurrency is the most handlers running at once; 0 means 4.
	Concurrency int
	// BatchSize is the most operations one claim leases; 0 means
	// Concurrency. The pool holds at most Concurrency + 2 × BatchSize
	// leases: the running handlers' and two batches, so a claim overlaps the
	// recording of the previous batch's results.
	BatchSize int
	// LeaseFor is each lease's length; 0 means one minute.
	LeaseFor time.Duration
	// HeartbeatEvery is how often running handlers' leases are extended;
	// 0 means LeaseFor / 3.
	HeartbeatEvery time.Duration
	// PollInterval is the wait after a claim found nothing; 0 means 100 ms.
	PollInterval time.Duration
	// FetchCooldown is the least time between claims, so freed slots are
	// claimed for together; 0 means 1 ms.
	FetchCooldown time.Duration
	// FlushEvery is the longest a result waits to be recorded with others;
	// 0 means 2 ms.
	FlushEvery time.Duration
	// ShutdownGrace is how long running handlers may finish after the
	// pool's context is cancelled; 0 means 10 seconds, negative means none.
	ShutdownGrace time.Duration
	// ConnectorName and OwnerDID optionally narrow what the pool claims.
	ConnectorName, OwnerDID string
	// Logger receives errors the pool retries past; nil is silent.
	Logger *slog.Logger
}

// Stats counts what a pool did.
type Stats struct {
	Claimed, Committed, Failed, Finished, Released, LeaseLost int64
}

// Pool is a re-drive worker pool; see the package doc.
type Pool struct {
	repo  *repository.Repository
	cfg   Config
	stats struct{ claimed, committed, failed, finished, released, leaseLost atomic.Int64 }
}

// New returns a pool on repo.
func New(repo *repository.Repository, cfg Config) (*Pool, error) {
	if repo == nil || cfg.Handler == nil {
		return nil, fmt.Errorf("%w: worker pool needs a repository and a handler", repository.ErrInvalidInput)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = cfg.Concurrency
	}
	if cfg.LeaseFor <= 0 {
		cfg.LeaseFor = time.Minute
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = cfg.LeaseFor / 3
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.FetchCooldown <= 0 {
		cfg.FetchCooldown = time.Millisecond
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 2 * time.Millisecond
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{repo: repo, cfg: cfg}, nil
}

// Stats returns the pool's counters so far.
func (p *Pool) Stats() Stats {
	s := &p.stats
	return Stats{Claimed: s.claimed.Load(), Committed: s.committed.Load(), Failed: s.failed.Load(),
		Finished: s.finished.Load(), Released: s.released.Load(), LeaseLost: s.leaseLost.Load()}
}

// job is one claimed operation while the pool holds it.
type job struct {
	op     models.Operation
	fence  repository.Fence
	cancel context.CancelFunc
}

// done is a handler's outcome, on its way to be recorded.
type done struct {
	job         *job
	result      Result
	interrupted bool // the handler's context ended: release, do not fail
}

// Run works until ctx is cancelled, then shuts down as the package doc
// says, and returns nil; it returns early only on a configuration error.
func (p *Pool) Run(ctx context.Context) error {
	// Two batches beyond the running handlers are held at once: with one,
	// short handlers finish a batch before it is recorded and the next claim
	// waits for that recording, so claims and recordings alternate; with two,
	// a claim runs while the previous batch is recorded.
	held := p.cfg.Concurrency + 2*p.cfg.BatchSize
	r := &run{pool: p, slots: make(chan struct{}, held),
		running: make(chan struct{}, p.cfg.Concurrency), results: make(chan done, held),
		held: map[repository.Fence]*job{}}
	// Handlers outlive ctx by the grace period; recording outlives them.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	record, stopRecord := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecord()
	stopGrace := context.AfterFunc(ctx, func() {
		if p.cfg.ShutdownGrace < 0 {
			stopWork()
			return
		}
		time.AfterFunc(p.cfg.ShutdownGrace, stopWork)
	})
	defer stopGrace()

	var completer, heartbeats sync.WaitGroup
	completer.Go(func() { r.complete(record) })
	hbCtx, stopHB := context.WithCancel(record)
	heartbeats.Go(func() { r.heartbeat(hbCtx) })

	r.fetch(ctx, record, work)
	r.handlers.Wait() // every handler has sent its outcome
	close(r.results)
	completer.Wait() // every outcome is recorded
	stopHB()
	heartbeats.Wait()
	return nil
}
