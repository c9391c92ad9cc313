package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// Config tunes a Pool; only Handler is required. A zero duration or count
// means its default; a negative one is refused.
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
	// 0 means LeaseFor / 3. It must be at most LeaseFor / 2: every lease
	// then gets at least two heartbeats, so one that is late (a slow
	// statement, a busy database) or fails does not lose it. A heartbeat
	// just shorter than the lease is refused, not accepted to lose leases
	// whenever a statement takes longer than the difference.
	HeartbeatEvery time.Duration
	// PollInterval is the wait after a claim found nothing; 0 means 100 ms.
	// On PostgreSQL a recorded operation also wakes the pool at once (see
	// DisableListen), so a long interval costs no pickup latency there.
	PollInterval time.Duration
	// DisableListen turns off waking on recorded operations (PostgreSQL
	// LISTEN, one connection per pool) and leaves polling alone. Set it
	// behind PgBouncer in transaction pooling, where LISTEN cannot work.
	DisableListen bool
	// FetchCooldown is the least time between claims, so freed slots are
	// claimed for together; 0 means 1 ms.
	FetchCooldown time.Duration
	// FlushEvery is the longest a result waits to be recorded with others;
	// 0 means 2 ms.
	FlushEvery time.Duration
	// HandlerTimeout bounds each handler: its context is cancelled when it
	// passes, and the attempt is a retryable failure of kind "timeout"
	// unless the handler still reports a commit. 0 means no bound.
	HandlerTimeout time.Duration
	// HandlerTimeoutFor, if set, gives one operation's bound instead (0
	// falls back to HandlerTimeout); a negative value is refused as that
	// operation's result.
	HandlerTimeoutFor func(op *models.Operation) time.Duration
	// ShutdownGrace is how long running handlers may finish after the
	// pool's context is cancelled before their contexts are cancelled too;
	// 0 means 10 seconds.
	ShutdownGrace time.Duration
	// FlushTimeout is how long after ShutdownGrace the pool keeps trying to
	// record results; then Run returns whatever the database does, logging
	// the operations whose results it could not record (their leases
	// expire and they are re-driven: delivery is at least once). 0 means 5
	// seconds.
	FlushTimeout time.Duration
	// ConnectorName and OwnerDID optionally narrow what the pool claims.
	ConnectorName, OwnerDID string
	// Logger receives what the pool could not do and refused results; nil
	// is silent.
	Logger *slog.Logger
	// OnFinished, if set, is called once for every claimed operation when
	// the pool is done with it (results Run gave up recording at shutdown,
	// Stats.Unrecorded, are not reported), from the goroutine that recorded
	// it: it
	// must be quick and must not block (count, observe a histogram). See
	// Finished; otelconnstore.WorkerMetrics returns one.
	OnFinished func(Finished)
}

// withDefaults returns cfg with zero values filled in, or ErrInvalidInput
// for a configuration that cannot work.
func (cfg Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if cfg.Handler == nil {
		bad("a handler is required")
	}
	if cfg.Concurrency < 0 || cfg.BatchSize < 0 {
		bad("concurrency %d and batch size %d must not be negative", cfg.Concurrency, cfg.BatchSize)
	}
	for name, d := range map[string]time.Duration{"LeaseFor": cfg.LeaseFor, "HeartbeatEvery": cfg.HeartbeatEvery,
		"PollInterval": cfg.PollInterval, "FetchCooldown": cfg.FetchCooldown, "FlushEvery": cfg.FlushEvery,
		"HandlerTimeout": cfg.HandlerTimeout, "ShutdownGrace": cfg.ShutdownGrace, "FlushTimeout": cfg.FlushTimeout} {
		if d < 0 {
			bad("%s %v must not be negative", name, d)
		}
	}
	cfg.Concurrency = orDefault(cfg.Concurrency, 4)
	cfg.BatchSize = orDefault(cfg.BatchSize, cfg.Concurrency)
	cfg.LeaseFor = orDefault(cfg.LeaseFor, time.Minute)
	cfg.HeartbeatEvery = orDefault(cfg.HeartbeatEvery, cfg.LeaseFor/3)
	if cfg.HeartbeatEvery > cfg.LeaseFor/2 {
		bad("HeartbeatEvery %v must be at most half of LeaseFor %v: one late heartbeat would lose leases under running handlers",
			cfg.HeartbeatEvery, cfg.LeaseFor)
	}
	cfg.PollInterval = orDefault(cfg.PollInterval, 100*time.Millisecond)
	cfg.FetchCooldown = orDefault(cfg.FetchCooldown, time.Millisecond)
	cfg.FlushEvery = orDefault(cfg.FlushEvery, 2*time.Millisecond)
	cfg.ShutdownGrace = orDefault(cfg.ShutdownGrace, 10*time.Second)
	cfg.FlushTimeout = orDefault(cfg.FlushTimeout, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("worker: %w: %w", repository.ErrInvalidInput, err)
	}
	return cfg, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
