package main

import (
	"context"
	"fmt"
	"strings"
)

// workerCounts are the worker counts of the chart of the pool against River.
var workerCounts = []int{4, 16, 64, 256, 2000}

// workersPoint is the pool and River at one worker count: medians of the
// paired rounds, ops/s.
type workersPoint struct {
	n           int
	pool, river float64
	ratio       float64
}

// workersBatchCap bounds the pool's BatchSize in the sweep at the README's
// high-throughput setting (1,024): 16 × 2,000 would lease the whole
// journal in one claim.
const workersBatchCap = 1024

// workers runs the pool at Concurrency N and River at MaxWorkers N for every
// N of workerCounts, paired rounds as the throughput step runs them, for the
// chart bench-workers.svg.
func workers(ctx context.Context, dsn string, jobs int, rep *report) error {
	lines := []string{"Pool against River by worker count (no target; bench-workers.svg), medians of paired rounds:"}
	for _, n := range workerCounts {
		p, err := rep.pairedRuns(ctx, dsn, jobs, n, min(poolBatchPerWorker*n, workersBatchCap), n, nil)
		if err != nil {
			return fmt.Errorf("workers %d: %w", n, err)
		}
		pt := workersPoint{n: n, pool: median(p.rates[0]), river: median(p.rates[1]), ratio: median(p.rounds)}
		rep.workers = append(rep.workers, pt)
		lines = append(lines, fmt.Sprintf("- %d workers: pool %.4g ops/s, River %.4g, %.2f×%s; CPU per item %s",
			n, pt.pool, pt.river, pt.ratio, row{rounds: p.rounds}.spread(), p.cpuNote()))
	}
	rep.notes = append(rep.notes, strings.Join(lines, "\n"))
	return nil
}
