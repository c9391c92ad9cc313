package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/worker"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is River's job: nothing to do, as the pool's handler does nothing.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// poolBatchPerWorker sizes the pool's claims: BatchSize 16 × Concurrency
// (64 at 4 workers, 256 at 16; the pool holds at most 33 × Concurrency
// leases), so a claim and a commit each carry hundreds of rows and the
// statements' fixed cost is spread over them (BENCHMARKS.md). A pool for slow
// handlers would hold fewer queued leases.
const poolBatchPerWorker = 16

// throughputRounds is how many paired rounds each worker count runs.
const throughputRounds = 3

// throughputPairs are the comparisons: the pool and River at equal N (4
// and 16), and each at its own best — the pool in its recommended
// high-throughput configuration (README: Concurrency 64, BatchSize 16 × 64),
// River at MaxWorkers 2,000 as its own benchmark runs it.
var throughputPairs = []struct {
	pool, river int
	target      float64
	name        string
}{
	{4, 4, 1.2, "claim+commit, 4 workers (ops/s)"},
	{16, 16, 1.2, "claim+commit, 16 workers (ops/s)"},
	{64, 2000, 1.0, "claim+commit, each at its best: pool Concurrency 64, River MaxWorkers 2,000 (ops/s)"},
}

// unreadUpkeep drops what a claim and a commit write but never read: the
// journal's indexes that serve the listings and the retention pass's keep
// rules, and the triggers that keep retention's table of rows to judge.
// Every claim and every commit writes a new version of its row, and each
// version is inserted into every index whose predicate it matches; a
// commit also enters its row among the rows to judge. The diagnostic run
// drops them, so the report can say how much of the pool's cost per item
// their upkeep is. It is a measurement, not a configuration: without them
// those features scan the journal, or miss rows.
var unreadUpkeep = []string{
	"DROP INDEX kubun_connector_operation_state_key_idx",
	"DROP INDEX kubun_connector_operation_owner_idx",
	"DROP INDEX kubun_connector_operation_doc_caller_idx",
	"DROP INDEX kubun_connector_operation_doc_owner_idx",
	"DROP TRIGGER kubun_connector_operation_pending_ins ON kubun_connector_operation",
	"DROP TRIGGER kubun_connector_operation_pending_upd ON kubun_connector_operation",
}

// throughput works the same number of pre-inserted no-op items through
// connstore's worker pool and through River, for every pair of
// throughputPairs, in paired rounds of alternating order.
func throughput(ctx context.Context, dsn string, jobs int, rep *report) error {
	for _, pair := range throughputPairs {
		p, err := rep.pairedRuns(ctx, dsn, jobs, pair.pool, poolBatchPerWorker*pair.pool, pair.river, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", pair.name, err)
		}
		rep.add(row{group: "throughput", name: pair.name, ours: median(p.rates[0]), theirs: median(p.rates[1]),
			higherBetter: true, anchor: "River v0.51.2", target: pair.target, rounds: p.rounds})
		rep.notes = append(rep.notes, fmt.Sprintf("CPU per item, %s: %s.", strings.TrimSuffix(pair.name, " (ops/s)"), p.cpuNote()))
	}
	// Where the pool's time goes at River's best: the same pairs on a
	// journal without the upkeep claims and commits do not read.
	best := throughputPairs[len(throughputPairs)-1]
	p, err := rep.pairedRuns(ctx, dsn, jobs, best.pool, poolBatchPerWorker*best.pool, best.river, unreadUpkeep)
	if err != nil {
		return fmt.Errorf("diagnostic run: %w", err)
	}
	rep.notes = append(rep.notes, fmt.Sprintf("Diagnostic, no target: the pool at its best on a journal without "+
		"the upkeep claims and commits do not read (the 4 indexes of the listings and the keep rules, and the "+
		"triggers of retention's rows to judge), against River at "+
		"MaxWorkers 2,000: %.4g ops/s against %.4g, %.2f×%s; CPU per item %s.",
		median(p.rates[0]), median(p.rates[1]), median(p.rounds), row{rounds: p.rounds}.spread(), p.cpuNote()))
	return nil
}

// paired is what measurePairs measured: each side's rates (0 the pool, 1
// River), the rounds' ratios, and each side's CPU per item (client,
// server), a value per round.
type paired struct {
	rates  [2][]float64
	rounds []float64
	cpu    [2][2][]float64
}

// pairKey is one paired comparison's configuration: items, the pool's
// Concurrency and BatchSize, River's MaxWorkers, the journal's drop
// statements (joined).
type pairKey struct {
	jobs, workers, batch, river int
	drop                        string
}

// pairedRuns works jobs items through the pool (workers, BatchSize batch,
// on a journal after the drop statements) and River (riverWorkers) in
// throughputRounds paired rounds of alternating order. A configuration
// measured earlier in the same bench run is not measured again: the
// throughput, workers and breakdown steps share some (the pairs at 4 and 16
// workers, the pool at its best as shipped and without upkeep), and a full
// run measures each once.
func (r *report) pairedRuns(ctx context.Context, dsn string, jobs, workers, batch, riverWorkers int, drop []string) (paired, error) {
	key := pairKey{jobs: jobs, workers: workers, batch: batch, river: riverWorkers, drop: strings.Join(drop, ";\n")}
	if p, ok := r.pairs[key]; ok {
		return p, nil
	}
	p, err := measurePairs(ctx, dsn, jobs, workers, batch, riverWorkers, drop)
	if err != nil {
		return p, err
	}
	if r.pairs == nil {
		r.pairs = map[pairKey]paired{}
	}
	r.pairs[key] = p
	return p, nil
}

// measurePairs is pairedRuns' measurement.
func measurePairs(ctx context.Context, dsn string, jobs, workers, batch, riverWorkers int, drop []string) (paired, error) {
	var p paired
	for i := range throughputRounds {
		rates := [2]float64{}
		for _, k := range alternate(i) {
			var m measured
			var err error
			if k == 0 {
				m, err = poolRun(ctx, dsn, jobs, workers, batch, drop)
			} else {
				m, err = riverRun(ctx, dsn, jobs, riverWorkers)
			}
			if err != nil {
				return p, err
			}
			rates[k] = float64(jobs) / m.took.Seconds()
			p.rates[k] = append(p.rates[k], rates[k])
			p.cpu[k][0] = append(p.cpu[k][0], float64(m.cpu.client.Microseconds())/float64(jobs))
			p.cpu[k][1] = append(p.cpu[k][1], float64(m.cpu.server.Microseconds())/float64(jobs))
		}
		p.rounds = append(p.rounds, rates[0]/rates[1])
	}
	return p, nil
}

// cpuNote gives both sides' CPU per item, medians of the rounds.
func (p paired) cpuNote() string {
	return fmt.Sprintf("connstore %.1f µs in the process + %.1f µs in the server; River %.1f µs + %.1f µs "+
		"(medians of the rounds)", median(p.cpu[0][0]), median(p.cpu[0][1]), median(p.cpu[1][0]), median(p.cpu[1][1]))
}

// measured is one timed run: how long it took and the CPU it used.
type measured struct {
	took time.Duration
	cpu  cpuUse
}

// stopwatch starts timing a run; its stop returns the run's measurement.
func stopwatch() func() measured {
	cpu := cpuNow() // read before the clock starts: reading /proc takes a while
	start := time.Now()
	return func() measured {
		took := time.Since(start)
		return measured{took: took, cpu: cpuNow().sub(cpu)}
	}
}

// poolRun times the worker pool (Concurrency workers, BatchSize batch)
// from start until every operation is committed, on a journal after the
// drop statements.
func poolRun(ctx context.Context, dsn string, jobs, workers, batch int, drop []string) (_ measured, err error) {
	db, repo, _, err := store(ctx, dsn, repositoryOptions())
	if err != nil {
		return measured{}, err
	}
	defer func() { err = errors.Join(err, dropSchema(ctx, db)) }()
	for _, stmt := range drop {
		if err := db.WithContext(ctx).Exec(stmt).Error; err != nil {
			return measured{}, err
		}
	}
	now := time.Now().UnixMilli()
	rows := make([]models.Operation, jobs)
	for i := range rows {
		id := fmt.Sprintf("op-%07d", i)
		rows[i] = models.Operation{CallerDID: "caller", OperationID: id, NodeKey: "n", OwnerDID: "owner",
			ConnectorName: "crm", Model: "m", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: id,
			PayloadHash: "h", ReissueIntent: models.JSON(`{}`), State: models.OperationAttempted, NextAttemptAt: &now,
			CreatedAt: now, UpdatedAt: now}
	}
	if err := db.CreateInBatches(rows, 1000).Error; err != nil {
		return measured{}, err
	}
	pool, err := worker.New(repo, worker.Config{Concurrency: workers, BatchSize: batch, LeaseFor: time.Minute,
		PollInterval: time.Millisecond, FlushEvery: time.Millisecond,
		Handler: func(context.Context, *models.Operation) worker.Result { return worker.Commit(nil, nil, nil) }})
	if err != nil {
		return measured{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := stopwatch()
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(runCtx) }()
	for pool.Stats().Committed < int64(jobs) {
		time.Sleep(time.Millisecond)
	}
	m := stop()
	cancel()
	return m, <-ran
}

// riverRun times River from start until it reports every job's completion
// persisted, configured as River's own benchmark is (FetchCooldown 1 ms).
func riverRun(ctx context.Context, dsn string, jobs, workers int) (_ measured, err error) {
	schema, sdsn, err := freshSchema(ctx, dsn, "rv")
	if err != nil {
		return measured{}, err
	}
	pool, err := pgxpool.New(ctx, sdsn)
	if err != nil {
		return measured{}, err
	}
	defer pool.Close()
	defer func() {
		_, dropErr := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		err = errors.Join(err, dropErr)
	}()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return measured{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return measured{}, err
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{Schema: schema, Workers: ws, FetchCooldown: time.Millisecond,
		FetchPollInterval: time.Millisecond, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}})
	if err != nil {
		return measured{}, err
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for i := 0; i < jobs; i++ {
		if params = append(params, river.InsertManyParams{Args: noopArgs{}}); len(params) == 1000 || i == jobs-1 {
			if _, err := client.InsertMany(ctx, params); err != nil {
				return measured{}, err
			}
			params = params[:0]
		}
	}
	// Timed until River reports every job's completion persisted, as the
	// pool is timed until every commit is recorded: the completer sends its
	// events once its batch's UPDATE returned. (A row's finalized_at is when
	// its worker finished, before the completer persisted it: timing by it
	// left River's last completion batch out of its time.)
	done, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs,
		Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer unsubscribe()
	stop := stopwatch()
	if err := client.Start(ctx); err != nil {
		return measured{}, err
	}
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for range jobs {
		select {
		case <-done:
		case <-timeout.C:
			return measured{}, errors.New("river: not every job completed within a minute")
		}
	}
	m := stop()
	var completed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return measured{}, err
	}
	if completed != jobs {
		return measured{}, fmt.Errorf("river: %d of %d jobs completed after as many completion events", completed, jobs)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m, client.Stop(stopCtx)
}
