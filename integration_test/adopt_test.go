package integrationtest

import (
	"context"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// tsSchema is the schema @kubun/store-connector's own migrations create: the
// sync-state table as its 0.17.1 migration builds it (version an integer),
// the others from the seed's row types (counters as integer, epoch
// milliseconds as bigint), with no connstore migrations table, no
// ended_lease_token and no consumed_at.
var tsSchema = []string{
	`CREATE TABLE kubun_connector_sync_state (connector_name text NOT NULL, owner_did text NOT NULL,
		checkpoint text, last_synced_at text NOT NULL, entity_count integer NOT NULL, status text NOT NULL,
		error text, lease_expires_at bigint, recovery text, version integer NOT NULL DEFAULT 0, incarnation text,
		CONSTRAINT kubun_connector_sync_state_pkey PRIMARY KEY (connector_name, owner_did))`,
	`CREATE TABLE kubun_connector_pending_auth (state text NOT NULL PRIMARY KEY, code_verifier text NOT NULL,
		owner_did text NOT NULL, connector_name text NOT NULL, redirect_uri text NOT NULL, scopes text,
		created_at bigint NOT NULL, expires_at bigint NOT NULL)`,
	`CREATE TABLE kubun_connector_operation (caller_did text NOT NULL, operation_id text NOT NULL,
		node_key text NOT NULL, owner_did text NOT NULL, connector_name text NOT NULL, model text NOT NULL,
		op text NOT NULL, account_key text NOT NULL, target text NOT NULL, source_id text,
		deterministic_event_id text NOT NULL, payload_hash text NOT NULL, reissue_intent text NOT NULL,
		provider_etag text, document_id text, result_entity text, state text NOT NULL, attempts integer NOT NULL,
		next_attempt_at bigint, last_kind text, last_http_status integer, version integer NOT NULL DEFAULT 0,
		incarnation text, lease_token text, lease_expires_at bigint, created_at bigint NOT NULL,
		updated_at bigint NOT NULL, PRIMARY KEY (caller_did, operation_id))`,
	`CREATE TABLE kubun_connector_projection_watch (owner_did text NOT NULL, connector_name text NOT NULL,
		model text NOT NULL, account_key text NOT NULL, source_id text NOT NULL, document_id text NOT NULL,
		verified_state_digest text, observed_winner_digest text, verification_status text NOT NULL,
		verification_attempts integer NOT NULL, repair_generation integer NOT NULL, next_attempt_at bigint,
		version integer NOT NULL DEFAULT 0, created_at bigint NOT NULL, updated_at bigint NOT NULL,
		PRIMARY KEY (owner_did, connector_name, model, account_key, source_id))`,
	`CREATE TABLE kubun_connector_sweep_receipt (owner_did text NOT NULL, connector_name text NOT NULL,
		"partition" text NOT NULL, provenance text NOT NULL, sequence integer NOT NULL, model_id text NOT NULL,
		scope text, keep text, source_fetch_hlc text NOT NULL, predicate text, kind text NOT NULL,
		complete integer NOT NULL, created_at bigint NOT NULL, committed_at bigint,
		PRIMARY KEY (owner_did, connector_name, "partition", provenance))`,
	`CREATE TABLE kubun_connector_sweep_candidate (owner_did text NOT NULL, connector_name text NOT NULL,
		"partition" text NOT NULL, provenance text NOT NULL, document_id text NOT NULL, source_id text,
		model_id text NOT NULL, state text NOT NULL, attempts integer NOT NULL, apply_failures integer NOT NULL,
		last_error text, updated_at bigint NOT NULL, next_attempt_at bigint NOT NULL,
		PRIMARY KEY (owner_did, connector_name, "partition", provenance, document_id))`,
	`CREATE TABLE kubun_connector_sweep_checkpoint (owner_did text NOT NULL, connector_name text NOT NULL,
		"partition" text NOT NULL, provenance text NOT NULL, receipt_sequence integer NOT NULL,
		updated_at bigint NOT NULL, PRIMARY KEY (owner_did, connector_name, "partition"))`,
}

// tsRows are rows the TypeScript store wrote, in its own encodings.
var tsRows = []string{
	`INSERT INTO kubun_connector_sync_state VALUES ('crm', 'alice', '{"page":3}', '2026-11-30T10:00:00Z', 42,
		'idle', NULL, NULL, '[]', 7, 'inc-ts')`,
	`INSERT INTO kubun_connector_pending_auth VALUES ('st', 'v', 'alice', 'crm', 'https://app.example/cb',
		'["contacts.read"]', 1000, 99999999999999)`,
	`INSERT INTO kubun_connector_operation VALUES ('alice', 'op1', 'n', 'alice', 'crm', 'contact', 'create',
		'acct', 'contacts', NULL, 'evt', 'hash', '{"name":"Ada"}', NULL, NULL, NULL, 'attempted', 1, 0, 'http',
		503, 2, 'inc-op', NULL, NULL, 1000, 2000)`,
	`INSERT INTO kubun_connector_projection_watch VALUES ('alice', 'crm', 'contact', 'acct', 'src', 'doc',
		'd1', NULL, 'verified', 0, 1, NULL, 3, 1000, 2000)`,
	`INSERT INTO kubun_connector_sweep_receipt VALUES ('alice', 'crm', 'contacts', 'p1', 1, 'contact',
		'{"list":"all"}', NULL, 'hlc', NULL, 'full', 1, 1000, NULL)`,
	`INSERT INTO kubun_connector_sweep_candidate VALUES ('alice', 'crm', 'contacts', 'p1', 'doc', NULL,
		'contact', 'present', 1, 0, NULL, 1500, 0)`,
	`INSERT INTO kubun_connector_sweep_checkpoint VALUES ('alice', 'crm', 'contacts', 'p0', 0, 900)`,
}

// TestMigrateAdoptsTypeScriptSchema: Migrate on a database the TypeScript
// store created records its tables as applied, adds what is missing,
// widens what must be wider, loses no row, and is a no-op the second time.
func TestMigrateAdoptsTypeScriptSchema(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{pgKind, sqlitekind} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := openBare(t, kind)
			for _, s := range append(append([]string{}, tsSchema...), tsRows...) {
				require.NoError(t, db.Exec(s).Error, s)
			}
			require.NoError(t, db.Use(hooks.New(hooks.Config{})))
			require.NoError(t, migrations.Migrate(context.Background(), db))
			repo, err := repository.New(db, repository.Options{NowFunc: newFakeClock().Now})
			require.NoError(t, err)
			requireTSRowsRead(t, db, repo)

			rec := newSQLRecorder()
			require.NoError(t, migrations.Migrate(context.Background(), db.Session(&gorm.Session{Logger: rec})))
			require.Empty(t, ddl(rec.take()), "a second Migrate changes nothing")
			requireTSRowsRead(t, db, repo)

			// The adopted schema is connstore's: a CAS write on the adopted row works.
			require.NoError(t, repo.UpdateSyncProgress(ctx(t), repository.UpdateSyncProgressParams{
				Key: repository.ConnectorKey{OwnerDID: "alice", ConnectorName: "crm"},
				Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
					require.Equal(t, int64(7), cur.Version)
					return repository.SyncProgressResult{Checkpoint: cur.Checkpoint, LastSyncedAt: "t", EntityCount: 43}, nil
				}}))
			if kind == pgKind {
				var typ string
				require.NoError(t, db.Raw(`SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema()
					AND table_name = 'kubun_connector_sync_state' AND column_name = 'version'`).Scan(&typ).Error)
				require.Equal(t, "bigint", typ, "widened")
			}
			require.Len(t, indexes(t, kind, db), map[string]int{pgKind: 33, sqlitekind: 20}[kind])
		})
	}
}

// requireTSRowsRead reads every TypeScript row back through the repository.
func requireTSRowsRead(t *testing.T, db *gorm.DB, repo *repository.Repository) {
	t.Helper()
	c := context.Background()
	st, err := repo.GetSyncState(c, repository.ConnectorKey{OwnerDID: "alice", ConnectorName: "crm"})
	require.NoError(t, err)
	require.JSONEq(t, `{"page":3}`, st.Checkpoint.String())
	require.Equal(t, "inc-ts", *st.Incarnation)
	op, err := repo.GetOperation(c, repository.OperationKey{CallerDID: "alice", OperationID: "op1"})
	require.NoError(t, err)
	require.Equal(t, int64(503), *op.LastHTTPStatus)
	require.Nil(t, op.EndedLeaseToken)
	w, err := repo.GetWatch(c, repository.WatchKey{OwnerDID: "alice", ConnectorName: "crm", Model: "contact",
		AccountKey: "acct", SourceID: "src"})
	require.NoError(t, err)
	require.Equal(t, int64(3), w.Version)
	receipts, err := repo.ListSweepReceipts(c, repository.ConnectorKey{OwnerDID: "alice", ConnectorName: "crm"})
	require.NoError(t, err)
	require.Len(t, receipts, 1)
	require.Equal(t, int64(1), receipts[0].Complete)
	cands, err := repo.ListSweepCandidates(c, repository.ListCandidatesParams{OwnerDID: "alice", ConnectorName: "crm", Limit: 10})
	require.NoError(t, err)
	require.Len(t, cands, 1)
	cp, err := repo.GetSweepCheckpoint(c, repository.PartitionKey{OwnerDID: "alice", ConnectorName: "crm", Partition: "contacts"})
	require.NoError(t, err)
	require.Equal(t, "p0", cp.Provenance)
	var auth models.PendingAuth
	require.NoError(t, db.Take(&auth, "state = ?", "st").Error)
	require.Equal(t, "v", auth.CodeVerifier.Reveal())
	require.Nil(t, auth.ConsumedAt)
}
