package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/jackc/pgx/v5"
)

// receiptRounds is how many paired rounds compare the receipt with the loop.
const receiptRounds = 3

// receipts records one relist with many candidates through connstore (one
// transaction, batched inserts) and through a per-row INSERT loop in one
// pgx transaction, in paired rounds of alternating order on a fresh schema
// each; and connstore's peak heap during the call.
func receipts(ctx context.Context, dsn string, rep *report) error {
	const n = 100000
	peaks := map[int]float64{}
	var ours, theirs, rounds []float64
	for i := range receiptRounds {
		db, repo, sdsn, err := store(ctx, dsn, repositoryOptions())
		if err != nil {
			return err
		}
		pair := [2]float64{}
		for _, k := range alternate(i) {
			var d time.Duration
			if k == 0 {
				d, err = recordReceipt(ctx, repo, n)
			} else {
				d, err = receiptLoop(ctx, sdsn, n)
			}
			if err != nil {
				return err
			}
			pair[k] = d.Seconds()
		}
		if err := dropSchema(ctx, db); err != nil {
			return err
		}
		ours, theirs, rounds = append(ours, pair[0]), append(theirs, pair[1]), append(rounds, pair[1]/pair[0])
	}
	rep.add(row{group: "receipt", name: fmt.Sprintf("RecordRelistReceipt, %d candidates (s)", n), ours: median(ours),
		theirs: median(theirs), anchor: "per-row INSERT loop, one pgx transaction", target: 10, rounds: rounds})
	// The heap is sampled in calls of their own: the sampler stops the world
	// every millisecond, which the timed calls above must not pay.
	for _, size := range []int{10000, n} {
		db, repo, _, err := store(ctx, dsn, repositoryOptions())
		if err != nil {
			return err
		}
		cands := candidatesOf(size)
		if peaks[size], err = peakHeap(func() error { _, err := recordCandidates(ctx, repo, cands); return err }); err != nil {
			return err
		}
		if err := dropSchema(ctx, db); err != nil {
			return err
		}
	}
	rep.notes = append(rep.notes, fmt.Sprintf("RecordRelistReceipt peak heap above the input: %.1f MB with 10,000 candidates, "+
		"%.1f MB with 100,000 (batches of 1,000 rows).", peaks[10000], peaks[n]))
	return nil
}

// recordReceipt records one complete relist of n candidates through the
// repository and returns its time.
func recordReceipt(ctx context.Context, repo *repository.Repository, n int) (time.Duration, error) {
	return recordCandidates(ctx, repo, candidatesOf(n))
}

// candidatesOf is a relist's n candidates.
func candidatesOf(n int) []repository.CandidateInput {
	cands := make([]repository.CandidateInput, n)
	for i := range cands {
		cands[i] = repository.CandidateInput{DocumentID: fmt.Sprintf("doc-%07d", i), ModelID: "contact"}
	}
	return cands
}

// recordCandidates records one complete relist of cands and returns its time.
func recordCandidates(ctx context.Context, repo *repository.Repository, cands []repository.CandidateInput) (time.Duration, error) {
	rec := repository.RelistReceipt{ReceiptKey: repository.ReceiptKey{PartitionKey: repository.PartitionKey{
		OwnerDID: "owner", ConnectorName: "crm", Partition: "contacts"}, Provenance: "p1"},
		ModelID: "contact", SourceFetchHLC: "hlc", Kind: "full", Complete: true}
	start := time.Now()
	_, err := repo.RecordRelistReceipt(ctx, rec, cands)
	return time.Since(start), err
}

// receiptLoop inserts the receipt and n candidates one statement each.
func receiptLoop(ctx context.Context, sdsn string, n int) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, sdsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO kubun_connector_sweep_receipt (owner_did, connector_name, "partition",
			provenance, sequence, model_id, source_fetch_hlc, kind, complete, created_at)
			VALUES ('owner', 'crm', 'contacts', 'loop', 2, 'contact', 'hlc', 'full', 1, 0)`); err != nil {
			return err
		}
		for i := range n {
			if _, err := tx.Exec(ctx, `INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name, "partition",
				provenance, document_id, model_id, state, attempts, apply_failures, updated_at, next_attempt_at)
				VALUES ('owner', 'crm', 'contacts', 'loop', $1, 'contact', 'pending', 0, 0, 0, 0) ON CONFLICT DO NOTHING`,
				fmt.Sprintf("doc-%07d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Since(start), err
}

// peakHeap runs fn and returns the highest heap in use during it above the
// heap before it, in MB, sampled every millisecond, and fn's error.
func peakHeap(fn func() error) (float64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	err := fn()
	close(stop)
	wg.Wait()
	if peak.Load() < base {
		return 0, err
	}
	return float64(peak.Load()-base) / (1 << 20), err
}
