package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/connstore/connstore/dashboard"
	"gorm.io/gorm"
)

// dashboardRounds is how many interleaved rounds time each page.
const dashboardRounds = 25

// dashboardPages are the pages an operator keeps open, each timed as one
// GET through the handler (HTML, as a browser asks for it).
var dashboardPages = []struct{ name, path string }{
	{"overview", "/"},
	{"attempted operations, a page of 50", "/operations?state=attempted"},
	{"dead operations, a page of 50", "/operations?state=dead"},
	{"committed operations, a page of 50", "/operations?state=committed"},
	{"attempted operations of one account", "/operations?state=attempted&account=a7"},
	{"one operation", "/operation?caller=caller-4&op=op-501"},
	{"a connector's sync states", "/sync?connector=crm"},
	{"accounts", "/accounts"},
}

// dashboardBench times the dashboard's pages on journals of each size
// whose history grows and whose queue does not, as a long-running
// deployment's does: 1,000 attempted and 200 dead operations, everything
// else committed (and waiting among retention's rows to judge, as after
// adoption: the count stops at 10,000); 1,000 sync states, 1,000 watches
// (5% due), 100 sweep checkpoints and 50 accounts under flow control at
// every size.
func dashboardBench(ctx context.Context, dsn string, sizes []int, rep *report) error {
	type site struct {
		db *gorm.DB
		h  http.Handler
		ms map[string][]float64
	}
	sites := make([]site, len(sizes))
	for i, n := range sizes {
		db, repo, _, err := store(ctx, dsn, repositoryOptions())
		if err != nil {
			return err
		}
		if err := seedDashboard(ctx, db, n); err != nil {
			return fmt.Errorf("seed %d: %w", n, err)
		}
		h, err := dashboard.New(repo, dashboard.Options{Refresh: -1})
		if err != nil {
			return err
		}
		sites[i] = site{db: db, h: h, ms: map[string][]float64{}}
	}
	for round := range dashboardRounds + 2 {
		for _, s := range sites {
			for _, p := range dashboardPages {
				ms, err := millis(func() error {
					w := httptest.NewRecorder()
					s.h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, p.path, nil))
					if w.Code != http.StatusOK {
						return fmt.Errorf("%s: status %d: %s", p.path, w.Code, w.Body.String())
					}
					return nil
				})
				if err != nil {
					return err
				}
				if round >= 2 { // two warm-up rounds
					s.ms[p.name] = append(s.ms[p.name], ms)
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Dashboard pages (ms, medians of %d interleaved rounds; the history grows, the queue does not):\n\n| page |", dashboardRounds)
	for _, n := range sizes {
		fmt.Fprintf(&b, " %d rows |", n)
	}
	b.WriteString(" growth | target | |\n| --- |")
	for range sizes {
		b.WriteString(" --- |")
	}
	b.WriteString(" --- | --- | --- |\n")
	for _, p := range dashboardPages {
		fmt.Fprintf(&b, "| %s |", p.name)
		for _, s := range sites {
			fmt.Fprintf(&b, " %.2f |", median(s.ms[p.name]))
		}
		g := median(sites[len(sites)-1].ms[p.name]) / median(sites[0].ms[p.name])
		fmt.Fprintf(&b, " %.2f× | ≤ 1.3× | %s |\n", g, met(g <= 1.3))
	}
	rep.notes = append(rep.notes, b.String())
	for _, s := range sites {
		if err := dropSchema(ctx, s.db); err != nil {
			return err
		}
	}
	return nil
}

// seedDashboard fills one journal for dashboardBench.
func seedDashboard(ctx context.Context, db *gorm.DB, n int) error {
	now := time.Now().Add(-time.Hour).UnixMilli()
	stmts := []string{fmt.Sprintf(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, next_attempt_at, version, incarnation,
		created_at, updated_at)
		SELECT 'caller-' || (g %% 7), 'op-' || g, 'n', 'owner-' || (g %% 100), 'crm', 'm', 'update', 'a' || (g %% 50), 't',
			'e' || g, 'h', '{}', 'doc-' || (g / 5),
			CASE WHEN g <= 1000 THEN 'attempted' WHEN g <= 1200 THEN 'dead' ELSE 'committed' END,
			0, %[2]d + g %% 1000, 0, 'i', %[2]d + g, %[2]d + g
		FROM generate_series(1, %[1]d) g`, n, now),
		fmt.Sprintf(`INSERT INTO kubun_connector_sync_state (connector_name, owner_did, last_synced_at, entity_count, status,
			version, incarnation)
		SELECT 'crm', 'owner-' || g, '2026-12-01', g, (ARRAY['idle','syncing','error'])[g %% 3 + 1], 0, 'i'
		FROM generate_series(1, 1000) g`),
		fmt.Sprintf(`INSERT INTO kubun_connector_projection_watch (owner_did, connector_name, model, account_key,
		source_id, document_id, verified_state_digest, verification_status, verification_attempts,
		repair_generation, next_attempt_at, version, created_at, updated_at)
		SELECT 'owner-' || (g %% 100), 'crm', 'm', 'a', 's-' || g, 'doc-' || g, 'd',
			CASE WHEN g %% 20 = 0 THEN 'pending_verification' ELSE 'verified' END, 0, 0,
			CASE WHEN g %% 20 = 0 THEN %[1]d END, 0, 1, 1
		FROM generate_series(1, 1000) g`, now),
		fmt.Sprintf(`INSERT INTO kubun_connector_sweep_checkpoint (owner_did, connector_name, partition, provenance,
			receipt_sequence, updated_at)
		SELECT 'owner-' || g, 'crm', 'p', 'prov', 1, %[1]d + g FROM generate_series(1, 100) g`, now),
		`INSERT INTO kubun_connector_flow_account (connector_name, account_key, max_in_flight, eligible_at, updated_at)
		SELECT 'crm', 'a' || g, 8, 0, 0 FROM generate_series(0, 49) g`,
		`VACUUM ANALYZE`}
	for _, s := range stmts {
		if err := db.WithContext(ctx).Exec(s).Error; err != nil {
			return err
		}
	}
	return nil
}
