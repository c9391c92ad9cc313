package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/connstore/connstore/repository"
	"gorm.io/gorm"
)

// scalePoint is one journal size's figures, in milliseconds, by
// measurement name (scaleSeries).
type scalePoint struct {
	size int
	ms   map[string]float64
}

// scaleRounds is how many rounds measure each journal: a round times every
// measurement on every journal in turn, so the sizes are compared under the
// same load. Nine batches of 500 after two warm-up passes leave the 10k
// journal with collectable rows.
const scaleRounds = 9

// unheldRounds is how many times the pass over an unheld journal is timed;
// each round first clears every hold (an UPDATE of the whole journal).
const unheldRounds = 3

// claimShape is one state of the journal's attempted rows (1% of it) that a
// claim of 50 must cost the same in: set applies it to the journal.
type claimShape struct {
	name string
	set  string
}

// claimShapes are the shapes a real journal passes through. Each set
// statement rewrites the attempted rows; @future is an hour ahead.
var claimShapes = []claimShape{
	{"fresh backlog", `UPDATE kubun_connector_operation SET next_attempt_at = NULL, lease_token = NULL,
		lease_expires_at = NULL, attempts = 0 WHERE state = 'attempted'`},
	{"due retries", `UPDATE kubun_connector_operation SET next_attempt_at = created_at, lease_token = NULL,
		lease_expires_at = NULL, attempts = 3 WHERE state = 'attempted'`},
	{"all in backoff or run-at later", `UPDATE kubun_connector_operation SET next_attempt_at = @future,
		lease_token = NULL, lease_expires_at = NULL WHERE state = 'attempted'`},
	{"many live leases", `UPDATE kubun_connector_operation SET next_attempt_at = @future,
		lease_token = 'held', lease_expires_at = @future WHERE state = 'attempted'`},
	{"empty queue", `UPDATE kubun_connector_operation SET state = 'dead', lease_token = NULL,
		lease_expires_at = NULL WHERE state = 'attempted'`},
}

// scaleSeries names the measurements in report order.
func scaleSeries() []string {
	names := []string{"retention pass, unheld journal", "retention pass, held journal"}
	for _, c := range claimShapes {
		names = append(names, "claim of 50, "+c.name)
	}
	return append(names, "due-sweep page of 100")
}

// journal is one seeded journal under measurement.
type journal struct {
	db   *gorm.DB
	repo *repository.Repository
	ms   map[string][]float64
}

// time runs step and files its milliseconds under name.
func (j *journal) time(name string, step func() error) error {
	ms, err := millis(step)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	j.ms[name] = append(j.ms[name], ms)
	return nil
}

// scale measures, on journals of each size (five operations per document,
// almost all finished and older than the cutoff, 1% attempted; a tenth as
// many watches, 5% due), all seeded first and then measured in interleaved
// rounds: a retention pass on an unheld journal (as after adoption) and on
// one whose kept rows are held, a claim of 50 in every shape of
// claimShapes, and a due-sweep page.
func scale(ctx context.Context, dsn string, sizes []int, rep *report) error {
	js := make([]*journal, len(sizes))
	for i, n := range sizes {
		db, repo, _, err := store(ctx, dsn, repositoryOptions())
		if err != nil {
			return err
		}
		js[i] = &journal{db: db, repo: repo, ms: map[string][]float64{}}
		if err := seedJournal(ctx, db, n); err != nil {
			return fmt.Errorf("seed %d: %w", n, err)
		}
	}
	unheld := "retention pass, unheld journal"
	for range unheldRounds {
		for _, j := range js {
			err := j.db.WithContext(ctx).Exec(`UPDATE kubun_connector_operation SET retention_hold = NULL
				WHERE retention_hold IS NOT NULL`).Error
			if err != nil {
				return err
			}
			if err := j.time(unheld, func() error { return collectBatch(ctx, j.repo) }); err != nil {
				return err
			}
		}
	}
	for _, j := range js {
		for range 2 { // warm: passes hold what they keep
			if err := collectBatch(ctx, j.repo); err != nil {
				return err
			}
		}
	}
	for range scaleRounds {
		for _, j := range js {
			if err := j.time("retention pass, held journal", func() error { return collectBatch(ctx, j.repo) }); err != nil {
				return err
			}
			if err := j.time("due-sweep page of 100", func() error { return firstDuePage(ctx, j.repo) }); err != nil {
				return err
			}
		}
	}
	future := map[string]any{"future": time.Now().Add(time.Hour).UnixMilli()}
	for _, c := range claimShapes {
		for _, j := range js {
			var args []any
			if strings.Contains(c.set, "@future") {
				args = append(args, future)
			}
			if err := j.db.WithContext(ctx).Exec(c.set, args...).Error; err != nil {
				return fmt.Errorf("shape %s: %w", c.name, err)
			}
		}
		for range scaleRounds {
			for _, j := range js {
				err := j.time("claim of 50, "+c.name, func() error {
					_, err := j.repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 50, LeaseFor: time.Millisecond})
					return err
				})
				if err != nil {
					return err
				}
			}
			time.Sleep(2 * time.Millisecond) // the 1 ms leases expire, so due shapes stay due
		}
	}
	for i, j := range js {
		p := scalePoint{size: sizes[i], ms: map[string]float64{}}
		for name, v := range j.ms {
			p.ms[name] = median(v)
		}
		rep.scale = append(rep.scale, p)
		if err := dropSchema(ctx, j.db); err != nil {
			return err
		}
	}
	return nil
}

func collectBatch(ctx context.Context, repo *repository.Repository) error {
	_, err := repo.CollectFinishedOperations(ctx, repository.CollectParams{Before: time.Now(), Limit: 500})
	return err
}

// firstDuePage reads the first page (100 items) of the streaming due sweep:
// 1% of even the smallest journal is due, so the page is due operations at
// every size.
func firstDuePage(ctx context.Context, repo *repository.Repository) error {
	same := func(_ context.Context, ids []string) (map[string]string, error) {
		out := make(map[string]string, len(ids))
		for _, id := range ids {
			out[id] = "d" // the verified digest: nothing diverged
		}
		return out, nil
	}
	n := 0
	for _, err := range repo.IterDue(ctx, repository.DueParams{Now: time.Now(), ReadWinners: same, PageSize: 100}) {
		if err != nil {
			return err
		}
		if n++; n == 100 {
			break
		}
	}
	return nil
}

func millis(fn func() error) (float64, error) {
	start := time.Now()
	if err := fn(); err != nil {
		return 0, err
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

func seedJournal(ctx context.Context, db *gorm.DB, n int) error {
	now := time.Now().Add(-time.Hour).UnixMilli()
	stmts := []string{fmt.Sprintf(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, next_attempt_at, version, incarnation,
		created_at, updated_at)
		SELECT 'caller-' || (g / 5 %% 50), 'op-' || g, 'n', 'owner-' || (g / 5 %% 100), 'crm', 'm', 'update', 'a', 't',
			'e' || g, 'h', '{}', 'doc-' || (g / 5),
			CASE WHEN g %% 100 = 0 THEN 'attempted' WHEN g %% 7 = 0 THEN 'dead' ELSE 'committed' END,
			0, %[2]d + g %% 1000, 0, 'i', %[2]d + g, %[2]d + g
		FROM generate_series(1, %[1]d) g`, n, now),
		fmt.Sprintf(`INSERT INTO kubun_connector_projection_watch (owner_did, connector_name, model, account_key,
		source_id, document_id, verified_state_digest, verification_status, verification_attempts,
		repair_generation, next_attempt_at, version, created_at, updated_at)
		SELECT 'owner-' || (g %% 100), 'crm', 'm', 'a', 's-' || g, 'doc-' || g, 'd',
			CASE WHEN g %% 20 = 0 THEN 'pending_verification' ELSE 'verified' END, 0, 0,
			CASE WHEN g %% 20 = 0 THEN %[2]d END, 0, 1, 1
		FROM generate_series(1, %[1]d) g`, n/10, now),
		`VACUUM ANALYZE`} // a long-lived table: hint bits set, visibility map current
	for _, s := range stmts {
		if err := db.WithContext(ctx).Exec(s).Error; err != nil {
			return err
		}
	}
	return nil
}
