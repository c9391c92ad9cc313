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
	// walKB is the WAL a retention pass wrote, in kilobytes, by
	// measurement name: a diagnostic, with no target.
	walKB map[string]float64
}

// scaleRounds is how many rounds measure each journal: a round times every
// measurement on every journal in turn, so the sizes are compared under the
// same load. Nine batches of 500 after two warm-up passes leave the 10k
// journal with collectable rows.
const scaleRounds = 9

// claimRounds is how many rounds time each claim shape: a claim costs a
// millisecond or less, where a shared machine's noise is as large as the
// differences measured, so it takes more rounds than the passes for a
// steady median.
const claimRounds = 25

// unheldRounds is how many passes over an unheld journal are timed: the
// journal's first passes, when nothing in it has been judged yet, as after
// adopting it (every finished row waits among the rows to judge; the
// queue of finished documents is empty).
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
	db    *gorm.DB
	repo  *repository.Repository
	ms    map[string][]float64
	walKB map[string][]float64
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
		js[i] = &journal{db: db, repo: repo, ms: map[string][]float64{}, walKB: map[string][]float64{}}
		if err := seedJournal(ctx, db, n); err != nil {
			return fmt.Errorf("seed %d: %w", n, err)
		}
	}
	unheld := "retention pass, unheld journal"
	for range unheldRounds {
		for _, j := range js {
			if err := j.pass(ctx, unheld); err != nil {
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
			if err := j.pass(ctx, "retention pass, held journal"); err != nil {
				return err
			}
			if err := j.time("due-sweep page of 100", func() error { return firstDuePage(ctx, j.repo) }); err != nil {
				return err
			}
		}
	}
	future := map[string]any{"future": time.Now().Add(time.Hour).UnixMilli()}
	for _, c := range claimShapes {
		if err := timeShape(ctx, js, c, future, false); err != nil {
			return err
		}
	}
	if err := vacuumedClaims(ctx, js, future); err != nil {
		return err
	}
	for i, j := range js {
		p := scalePoint{size: sizes[i], ms: map[string]float64{}, walKB: map[string]float64{}}
		for name, v := range j.ms {
			p.ms[name] = median(v)
		}
		for name, v := range j.walKB {
			p.walKB[name] = median(v)
		}
		rep.scale = append(rep.scale, p)
		if err := dropSchema(ctx, j.db); err != nil {
			return err
		}
	}
	rep.notes = append(rep.notes, walNote(rep.scale), vacuumedNote(rep.scale))
	return nil
}

// pass times one retention pass under name and files the WAL it wrote
// (the server's WAL insert position before and after, read outside the
// timing; the bench is the server's only client) under the same name.
func (j *journal) pass(ctx context.Context, name string) error {
	var before string
	if err := j.db.WithContext(ctx).Raw("SELECT pg_current_wal_insert_lsn()::text").Scan(&before).Error; err != nil {
		return err
	}
	if err := j.time(name, func() error { return collectBatch(ctx, j.repo) }); err != nil {
		return err
	}
	var kb float64
	err := j.db.WithContext(ctx).Raw("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), CAST(? AS pg_lsn)) / 1024",
		before).Scan(&kb).Error
	j.walKB[name] = append(j.walKB[name], kb)
	return err
}

// walNote reports the WAL the retention passes wrote, smallest journal to
// largest. A pass holds or deletes about the same number of rows at every
// size, but at 10k rows they share a few heap and index pages where at 1M
// nearly each is on pages of its own: every page first written since the
// last checkpoint goes to the WAL whole (full-page writes, on by default).
func walNote(points []scalePoint) string {
	var b strings.Builder
	b.WriteString("Diagnostic, no target: the WAL a retention pass wrote (medians, kB, smallest journal to largest):")
	for _, name := range scaleSeries()[:2] {
		fmt.Fprintf(&b, "\n- %s:", name)
		for _, p := range points {
			fmt.Fprintf(&b, " %.0f", p.walKB[name])
		}
	}
	return b.String()
}

// vacuumedSuffix marks the diagnostic claim measurements' names.
const vacuumedSuffix = ", table vacuumed"

// vacuumedClaims is a diagnostic, with no target: every claim shape again,
// each journal vacuumed (no ANALYZE) after the shape is set, so the claims
// find no index entries of the rows' earlier versions, as they do after
// autovacuum's visit. Every version a shape change or a claim writes
// leaves its old entry in the claim index until a vacuum; a claim steps
// over the dead ones in its range, and the bench changes 1% of each
// journal at once, so at 1M rows those are 100 times as many as at 10k. It
// runs after the measurements with targets, which it leaves as they were.
func vacuumedClaims(ctx context.Context, js []*journal, future map[string]any) error {
	for _, j := range js {
		// The last shape left no row attempted: the seed's are back first.
		if err := j.db.WithContext(ctx).Exec(reattempt).Error; err != nil {
			return err
		}
	}
	for _, c := range claimShapes {
		if err := timeShape(ctx, js, c, future, true); err != nil {
			return err
		}
	}
	return nil
}

// timeShape sets shape c on every journal (@future is future's value),
// vacuums each after it when vacuumed is set, and times claimRounds claims
// of 50 on each, filed under the shape's name (with vacuumedSuffix when
// vacuumed).
func timeShape(ctx context.Context, js []*journal, c claimShape, future map[string]any, vacuumed bool) error {
	name := "claim of 50, " + c.name
	if vacuumed {
		name += vacuumedSuffix
	}
	for _, j := range js {
		var args []any
		if strings.Contains(c.set, "@future") {
			args = append(args, future)
		}
		if err := j.db.WithContext(ctx).Exec(c.set, args...).Error; err != nil {
			return fmt.Errorf("shape %s: %w", c.name, err)
		}
		if vacuumed {
			if err := j.db.WithContext(ctx).Exec("VACUUM kubun_connector_operation").Error; err != nil {
				return fmt.Errorf("shape %s: %w", c.name, err)
			}
		}
	}
	for range claimRounds {
		for _, j := range js {
			err := j.time(name, func() error {
				_, err := j.repo.ClaimOperations(ctx, repository.ClaimParams{Limit: 50, LeaseFor: time.Millisecond})
				return err
			})
			if err != nil {
				return err
			}
		}
		time.Sleep(2 * time.Millisecond) // the 1 ms leases expire, so due shapes stay due
	}
	return nil
}

// vacuumedNote reports vacuumedClaims' figures, smallest journal to largest.
func vacuumedNote(points []scalePoint) string {
	var b strings.Builder
	b.WriteString("Diagnostic, no target: the claims again, each journal vacuumed after its shape was set " +
		"(medians, ms, smallest journal to largest):")
	for _, c := range claimShapes {
		name := "claim of 50, " + c.name + vacuumedSuffix
		fmt.Fprintf(&b, "\n- %s:", c.name)
		for _, p := range points {
			fmt.Fprintf(&b, " %.2f", p.ms[name])
		}
		fmt.Fprintf(&b, " (growth %.2f×)", points[len(points)-1].ms[name]/points[0].ms[name])
	}
	return b.String()
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

// reattempt makes the seed's attempted rows (every hundredth, so their ids
// end in 00) attempted again, whatever state the claim shapes left them in.
const reattempt = `UPDATE kubun_connector_operation SET state = 'attempted', lease_token = NULL,
	lease_expires_at = NULL WHERE operation_id LIKE '%00'`

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
		// Adopted with its rows: no finish is waiting to release holds.
		`DELETE FROM kubun_connector_retention_finished`,
		`VACUUM ANALYZE`} // a long-lived table: hint bits set, visibility map current
	for _, s := range stmts {
		if err := db.WithContext(ctx).Exec(s).Error; err != nil {
			return err
		}
	}
	return nil
}
