package integrationtest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// sqlRecorder is a gorm logger that keeps every statement, values inlined
// (or, with bare set, as the driver received it, placeholders and all).
type sqlRecorder struct {
	logger.Interface
	bare  bool
	mu    sync.Mutex
	stmts []string
	// sent is every statement as the driver received it, placeholders and
	// values apart, in the order of stmts; last is the one being traced.
	sent []sentStmt
	last sentStmt
}

// sentStmt is a statement's text, placeholders and all, and its values.
type sentStmt struct {
	SQL  string
	Vars []any
}

// ParamsFilter implements gorm.ParamsFilter: a bare recorder
// keeps the statement text without its values.
func (r *sqlRecorder) ParamsFilter(_ context.Context, sql string, params ...any) (string, []any) {
	r.mu.Lock()
	r.last = sentStmt{SQL: sql, Vars: params}
	r.mu.Unlock()
	if r.bare {
		return sql, nil
	}
	return sql, params
}

func newSQLRecorder() *sqlRecorder { return &sqlRecorder{Interface: logger.Discard} }

func (r *sqlRecorder) LogMode(logger.LogLevel) logger.Interface { return r }

func (r *sqlRecorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	r.mu.Lock()
	r.stmts = append(r.stmts, sql)
	r.sent = append(r.sent, r.last)
	r.mu.Unlock()
}

func (r *sqlRecorder) take() []string {
	out, _ := r.takeBoth()
	return out
}

// takeBoth is take, with each statement as the driver received it too.
func (r *sqlRecorder) takeBoth() ([]string, []sentStmt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, sent := r.stmts, r.sent
	r.stmts, r.sent = nil, nil
	return out, sent
}

// recordingRepo returns a repository on e's database whose statements rec keeps.
func recordingRepo(t *testing.T, e *env) (*repository.Repository, *sqlRecorder) {
	t.Helper()
	rec := newSQLRecorder()
	repo, err := repository.New(e.db.Session(&gorm.Session{Logger: rec}),
		repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
	require.NoError(t, err)
	return repo, rec
}

// isUpdate reports whether a recorded statement is an UPDATE, one that
// reads its rows from a CTE (store.PickedUpdate) included.
func isUpdate(s string) bool {
	return strings.HasPrefix(s, "UPDATE") || strings.HasPrefix(s, "WITH kubun_connector_picked AS MATERIALIZED")
}

// recordedUpdate is the last UPDATE rec recorded since it was last taken.
func recordedUpdate(t *testing.T, rec *sqlRecorder) string {
	t.Helper()
	var update string
	for _, s := range rec.take() {
		if isUpdate(s) {
			update = s
		}
	}
	require.NotEmpty(t, update, "no UPDATE was recorded")
	return update
}

// requireIndexBound EXPLAINs each statement and fails on a sequential scan
// of any of tables.
func requireIndexBound(t *testing.T, db *gorm.DB, stmts []string, tables ...string) {
	t.Helper()
	for stmt, text := range explainRecorded(t, db, stmts) {
		for _, table := range tables {
			require.NotContains(t, text, "Seq Scan on "+table, "statement:\n%s\nplan:\n%s", stmt, text)
		}
	}
}

// explainRecorded EXPLAINs each recorded statement as the call planned it,
// and returns the plans by statement. They are explained in one
// transaction, rolled back, in which the call's own planner settings
// (set_config, local to its transaction) are made again.
func explainRecorded(t *testing.T, db *gorm.DB, stmts []string) map[string]string {
	t.Helper()
	require.NotEmpty(t, stmts)
	tx := db.Begin()
	require.NoError(t, tx.Error)
	defer tx.Rollback()
	plans := map[string]string{}
	for _, stmt := range stmts {
		if strings.HasPrefix(stmt, "SET ") {
			continue // session settings have no plan
		}
		if strings.Contains(stmt, "set_config(") {
			require.NoError(t, tx.Exec(stmt).Error, stmt)
			continue
		}
		var plan []string
		require.NoError(t, tx.Raw("EXPLAIN "+stmt).Scan(&plan).Error, stmt)
		plans[stmt] = strings.Join(plan, "\n")
		t.Logf("%s\n%s", stmt, plans[stmt])
	}
	return plans
}

// seedLargePostgres fills the operation and watch tables with 100k rows
// each, mostly finished or settled, as a long-running connector's would be.
func seedLargePostgres(t *testing.T, db *gorm.DB) {
	t.Helper()
	require.NoError(t, db.Exec(`INSERT INTO kubun_connector_operation (caller_did, operation_id, node_key,
		owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash,
		reissue_intent, document_id, state, attempts, next_attempt_at, version, incarnation, lease_token,
		lease_expires_at, created_at, updated_at)
		SELECT 'caller-' || (g % 50), 'op-' || g, 'n', 'owner-' || (g % 100), 'crm', 'm', 'create', 'a', 't',
			'e' || g, 'h', '{}', CASE WHEN g % 3 = 0 THEN NULL ELSE 'doc-' || (g % 5000) END,
			CASE WHEN g % 100 = 0 THEN 'attempted' WHEN g % 7 = 0 THEN 'dead' ELSE 'committed' END,
			0, CASE WHEN g % 200 = 0 THEN NULL ELSE 1000 + g END, 0, 'i',
			CASE WHEN g % 11 = 0 THEN 'lease' END, CASE WHEN g % 11 = 0 THEN 5000 + g END,
			1000000 + g, 2000000 + g
		FROM generate_series(1, 100000) g`).Error)
	require.NoError(t, db.Exec(`INSERT INTO kubun_connector_projection_watch (owner_did, connector_name,
		model, account_key, source_id, document_id, verified_state_digest, observed_winner_digest,
		verification_status, verification_attempts, repair_generation, next_attempt_at, version,
		created_at, updated_at)
		SELECT 'owner-' || (g % 100), 'crm', 'm', 'a', 's-' || g, 'doc-' || g, 'd', NULL,
			CASE WHEN g % 500 = 0 THEN 'verified' WHEN g % 501 = 0 THEN 'repair_failed'
				ELSE 'pending_verification' END,
			0, 0, CASE WHEN g % 50 = 0 THEN 1000 + g END, 0, 1, 1
		FROM generate_series(1, 100000) g`).Error)
	require.NoError(t, db.Exec(`ANALYZE kubun_connector_operation, kubun_connector_projection_watch`).Error)
}

// TestExplainClaimAndDueUseIndexes: over 100k rows the claim and the due
// sweep never scan the operation or watch table sequentially.
func TestExplainClaimAndDueUseIndexes(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	seedLargePostgres(t, e.db)
	repo, rec := recordingRepo(t, e)
	e.clock.Set(time.UnixMilli(50000))

	ops, err := repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	requireIndexBound(t, e.db, rec.take(), "kubun_connector_operation")

	// The batched commit joins its rows by primary key.
	commits := make([]repository.CommitParams, len(ops))
	for i := range ops {
		commits[i] = repository.CommitParams{Fence: repository.FenceOf(&ops[i])}
	}
	_, err = repo.CommitOperations(ctx(t), commits)
	require.NoError(t, err)
	requireIndexBound(t, e.db, rec.take(), "kubun_connector_operation")

	work, err := repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners})
	require.NoError(t, err)
	require.NotEmpty(t, work.Operations)
	requireIndexBound(t, e.db, rec.take(), "kubun_connector_operation", "kubun_connector_projection_watch")
}

// TestExplainRetentionAndCandidatesUseIndexes: over 100k rows the retention
// DELETE and the candidate listing never scan their tables sequentially.
func TestExplainRetentionAndCandidatesUseIndexes(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	seedLargePostgres(t, e.db)
	require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name,
		"partition", provenance, document_id, source_id, model_id, state, attempts, apply_failures,
		updated_at, next_attempt_at)
		SELECT 'owner-' || (g % 100), 'crm', 'p' || (g % 10), 'prov-' || (g % 7), 'doc-' || g, NULL, 'm',
			CASE WHEN g % 3 = 0 THEN 'applied' WHEN g % 3 = 1 THEN 'pending' ELSE 'present' END,
			0, 0, g, g % 1000
		FROM generate_series(1, 120000) g`).Error)
	require.NoError(t, e.db.Exec(`ANALYZE kubun_connector_sweep_candidate`).Error)
	repo, rec := recordingRepo(t, e)
	e.clock.Set(time.UnixMilli(3000000))

	n, err := repo.CollectFinishedOperations(ctx(t), repository.CollectParams{Before: time.UnixMilli(2050000), Limit: 100})
	require.NoError(t, err)
	require.Positive(t, n)
	requireIndexBound(t, e.db, rec.take(), "kubun_connector_operation")

	due := time.UnixMilli(500)
	for _, p := range []repository.ListCandidatesParams{
		{OwnerDID: "owner-7", ConnectorName: "crm", Limit: 100},
		{OwnerDID: "owner-7", ConnectorName: "crm", Limit: 100, DueAt: &due},
	} {
		page, err := repo.ListSweepCandidates(ctx(t), p)
		require.NoError(t, err)
		require.NotEmpty(t, page)
		p.After = repository.CandidateCursorOf(&page[len(page)-1])
		_, err = repo.ListSweepCandidates(ctx(t), p)
		require.NoError(t, err)
	}
	requireIndexBound(t, e.db, rec.take(), "kubun_connector_sweep_candidate")
}
