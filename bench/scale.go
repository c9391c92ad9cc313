package main

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/repository"
	"gorm.io/gorm"
)

// scalePoint is one journal size's figures, in milliseconds.
type scalePoint struct {
	size                      int
	retention, claim, duePage float64
}

// scaleRounds is how many rounds measure each journal: a round times one
// retention batch, one claim and one due-sweep page on every journal in
// turn, so the sizes are compared under the same load. Nine batches of 500
// after two warm-up passes leave the 10k journal with collectable rows.
const scaleRounds = 9

// journal is one seeded journal under measurement.
type journal struct {
	db   *gorm.DB
	repo *repository.Repository
	p    scalePoint
	ms   [3][]float64 // retention, claim, due page
}

// scale measures one retention batch, one claim and one due-sweep page on
// journals of each size (five operations per document, almost all finished
// and older than the cutoff, 1% due; a tenth as many watches, 5% due), all
// seeded first and then measured in interleaved rounds.
func scale(ctx context.Context, dsn string, sizes []int, rep *report) error {
	js := make([]*journal, len(sizes))
	for i, n := range sizes {
		db, repo, _, err := store(ctx, dsn, repositoryOptions())
		if err != nil {
			return err
		}
		js[i] = &journal{db: db, repo: repo, p: scalePoint{size: n}}
		if err := seedJournal(ctx, db, n); err != nil {
			return fmt.Errorf("seed %d: %w", n, err)
		}
		for range 2 { // warm: the first passes hold what they keep
			if err := collectBatch(ctx, repo); err != nil {
				return err
			}
		}
	}
	for range scaleRounds {
		for _, j := range js {
			steps := []func() error{
				func() error { return collectBatch(ctx, j.repo) },
				func() error {
					_, err := j.repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 10, LeaseFor: time.Millisecond})
					return err
				},
				func() error { return firstDuePage(ctx, j.repo) },
			}
			for k, step := range steps {
				ms, err := millis(step)
				if err != nil {
					return err
				}
				j.ms[k] = append(j.ms[k], ms)
			}
		}
		time.Sleep(2 * time.Millisecond) // the 1 ms leases expire, so the next claims find work
	}
	for _, j := range js {
		j.p.retention, j.p.claim, j.p.duePage = median(j.ms[0]), median(j.ms[1]), median(j.ms[2])
		rep.scale = append(rep.scale, j.p)
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

func dropSchema(ctx context.Context, db *gorm.DB) error {
	return db.WithContext(ctx).Exec("DROP SCHEMA " + currentSchema(db) + " CASCADE").Error
}

func currentSchema(db *gorm.DB) string {
	var s string
	db.Raw("SELECT current_schema()").Scan(&s)
	return s
}
