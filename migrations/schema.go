package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// The DDL is plain SQL that PostgreSQL and SQLite both accept, frozen per
// migration id: a model changing later must not change what an old id did.
// Epoch-millisecond columns are BIGINT; they overflow a 32-bit integer.

var syncStateDDL = []string{
	`CREATE TABLE kubun_connector_sync_state (
		connector_name TEXT NOT NULL,
		owner_did TEXT NOT NULL,
		checkpoint TEXT,
		last_synced_at TEXT NOT NULL,
		entity_count BIGINT NOT NULL,
		status TEXT NOT NULL,
		error TEXT,
		lease_expires_at BIGINT,
		recovery TEXT,
		version BIGINT NOT NULL DEFAULT 0,
		incarnation TEXT,
		CONSTRAINT kubun_connector_sync_state_pkey PRIMARY KEY (connector_name, owner_did)
	)`,
}

var pendingAuthDDL = []string{
	`CREATE TABLE kubun_connector_pending_auth (
		state TEXT NOT NULL,
		code_verifier TEXT NOT NULL,
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		redirect_uri TEXT NOT NULL,
		scopes TEXT,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		consumed_at BIGINT,
		CONSTRAINT kubun_connector_pending_auth_pkey PRIMARY KEY (state)
	)`,
	// Expiry cleanup scans by expiry time.
	`CREATE INDEX kubun_connector_pending_auth_expires_idx
		ON kubun_connector_pending_auth (expires_at)`,
}

var operationDDL = []string{
	`CREATE TABLE kubun_connector_operation (
		caller_did TEXT NOT NULL,
		operation_id TEXT NOT NULL,
		node_key TEXT NOT NULL,
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		model TEXT NOT NULL,
		op TEXT NOT NULL,
		account_key TEXT NOT NULL,
		target TEXT NOT NULL,
		source_id TEXT,
		deterministic_event_id TEXT NOT NULL,
		payload_hash TEXT NOT NULL,
		reissue_intent TEXT NOT NULL,
		provider_etag TEXT,
		document_id TEXT,
		result_entity TEXT,
		state TEXT NOT NULL,
		attempts BIGINT NOT NULL DEFAULT 0,
		next_attempt_at BIGINT,
		last_kind TEXT,
		last_http_status BIGINT,
		version BIGINT NOT NULL DEFAULT 0,
		incarnation TEXT,
		lease_token TEXT,
		lease_expires_at BIGINT,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		CONSTRAINT kubun_connector_operation_pkey PRIMARY KEY (caller_did, operation_id)
	)`,
	// Claiming: state = 'attempted' AND next_attempt_at <= now, oldest first.
	`CREATE INDEX kubun_connector_operation_due_idx
		ON kubun_connector_operation (state, next_attempt_at)`,
	// Due listing: one state, paged by key.
	`CREATE INDEX kubun_connector_operation_state_key_idx
		ON kubun_connector_operation (state, caller_did, operation_id)`,
	// Expired-lease scans.
	`CREATE INDEX kubun_connector_operation_lease_idx
		ON kubun_connector_operation (lease_expires_at)`,
	// Retention: finished states, oldest updated_at first.
	`CREATE INDEX kubun_connector_operation_retention_idx
		ON kubun_connector_operation (state, updated_at)`,
	// Retention keep-rules: the newest row per (document, caller) and per
	// (document, owner).
	`CREATE INDEX kubun_connector_operation_doc_caller_idx
		ON kubun_connector_operation (document_id, caller_did, created_at)`,
	`CREATE INDEX kubun_connector_operation_doc_owner_idx
		ON kubun_connector_operation (document_id, owner_did, created_at)`,
	// Paged listing by owner.
	`CREATE INDEX kubun_connector_operation_owner_idx
		ON kubun_connector_operation (owner_did, created_at, caller_did, operation_id)`,
}

var watchDDL = []string{
	`CREATE TABLE kubun_connector_projection_watch (
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		model TEXT NOT NULL,
		account_key TEXT NOT NULL,
		source_id TEXT NOT NULL,
		document_id TEXT NOT NULL,
		verified_state_digest TEXT,
		observed_winner_digest TEXT,
		verification_status TEXT NOT NULL,
		verification_attempts BIGINT NOT NULL DEFAULT 0,
		repair_generation BIGINT NOT NULL DEFAULT 0,
		next_attempt_at BIGINT,
		version BIGINT NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		CONSTRAINT kubun_connector_projection_watch_pkey
			PRIMARY KEY (owner_did, connector_name, model, account_key, source_id)
	)`,
	// SCHEDULE branch: next_attempt_at <= now, paged by (next_attempt_at, key).
	`CREATE INDEX kubun_connector_projection_watch_schedule_idx
		ON kubun_connector_projection_watch
		(next_attempt_at, owner_did, connector_name, model, account_key, source_id)`,
	// AUDIT branch: one status at a time, paged by key.
	`CREATE INDEX kubun_connector_projection_watch_audit_idx
		ON kubun_connector_projection_watch
		(verification_status, owner_did, connector_name, model, account_key, source_id)`,
	`CREATE INDEX kubun_connector_projection_watch_document_idx
		ON kubun_connector_projection_watch (document_id)`,
}

var sweepDDL = []string{
	`CREATE TABLE kubun_connector_sweep_receipt (
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		"partition" TEXT NOT NULL,
		provenance TEXT NOT NULL,
		sequence BIGINT NOT NULL,
		model_id TEXT NOT NULL,
		scope TEXT,
		keep TEXT,
		source_fetch_hlc TEXT NOT NULL,
		predicate TEXT,
		kind TEXT NOT NULL,
		complete INTEGER NOT NULL,
		created_at BIGINT NOT NULL,
		committed_at BIGINT,
		CONSTRAINT kubun_connector_sweep_receipt_pkey
			PRIMARY KEY (owner_did, connector_name, "partition", provenance),
		-- Recording order per partition; concurrent recorders cannot share a number.
		CONSTRAINT kubun_connector_sweep_receipt_sequence_key
			UNIQUE (owner_did, connector_name, "partition", sequence)
	)`,
	// Uncommitted receipts of a connector, oldest first.
	`CREATE INDEX kubun_connector_sweep_receipt_pending_idx
		ON kubun_connector_sweep_receipt (owner_did, connector_name, committed_at, created_at)`,
	`CREATE TABLE kubun_connector_sweep_candidate (
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		"partition" TEXT NOT NULL,
		provenance TEXT NOT NULL,
		document_id TEXT NOT NULL,
		source_id TEXT,
		model_id TEXT NOT NULL,
		state TEXT NOT NULL,
		attempts BIGINT NOT NULL DEFAULT 0,
		apply_failures BIGINT NOT NULL DEFAULT 0,
		last_error TEXT,
		updated_at BIGINT NOT NULL,
		next_attempt_at BIGINT NOT NULL DEFAULT 0,
		CONSTRAINT kubun_connector_sweep_candidate_pkey
			PRIMARY KEY (owner_did, connector_name, "partition", provenance, document_id)
	)`,
	// Candidate listing in (updated_at, document_id) order, paged by key.
	`CREATE INDEX kubun_connector_sweep_candidate_list_idx
		ON kubun_connector_sweep_candidate
		(owner_did, connector_name, updated_at, document_id, "partition", provenance)`,
	// Unresolved candidates of a partition (checkpoint commit checks).
	`CREATE INDEX kubun_connector_sweep_candidate_state_idx
		ON kubun_connector_sweep_candidate (owner_did, connector_name, "partition", state)`,
	`CREATE TABLE kubun_connector_sweep_checkpoint (
		owner_did TEXT NOT NULL,
		connector_name TEXT NOT NULL,
		"partition" TEXT NOT NULL,
		provenance TEXT NOT NULL,
		receipt_sequence BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		CONSTRAINT kubun_connector_sweep_checkpoint_pkey
			PRIMARY KEY (owner_did, connector_name, "partition")
	)`,
}

// all is the ordered migration list. Ids are stable: never renumber or edit
// an applied migration; add a new one.
func all() []*gormigrate.Migration {
	return []*gormigrate.Migration{
		tableMigration("connstore_0001_sync_state", syncStateDDL, "kubun_connector_sync_state"),
		tableMigration("connstore_0002_pending_auth", pendingAuthDDL, "kubun_connector_pending_auth"),
		tableMigration("connstore_0003_operation", operationDDL, "kubun_connector_operation"),
		tableMigration("connstore_0004_projection_watch", watchDDL, "kubun_connector_projection_watch"),
		tableMigration("connstore_0005_sweep", sweepDDL,
			"kubun_connector_sweep_checkpoint", "kubun_connector_sweep_candidate", "kubun_connector_sweep_receipt"),
		endedLeaseMigration(),
		candidatePagingMigration(),
		receiptSequenceIndexMigration(),
		retentionHoldMigration(),
		dropLeaseIndexMigration(),
		recordNotifyMigration(),
		claimIndexMigration(),
		retentionQueueMigration(),
		collectOwnerIndexMigration(),
		leanOperationIndexMigration(),
		byteOrderMigration(),
		retentionPendingMigration(),
		retentionHeldMigration(),
		seqMigration(),
		flowMigration(),
		weightMigration(),
		eligibleOrderMigration(),
		attemptsMigration(),
	}
}

// tableMigration runs ddl on migrate (or adopts the tables when another
// implementation created them already; see adopt) and drops the tables
// (with their indexes) on rollback.
func tableMigration(id string, ddl []string, tables ...string) *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: id,
		Migrate: func(tx *gorm.DB) error {
			if tablesExist(tx, tables) {
				return adopt(tx, ddl)
			}
			return execAll(tx, ddl)
		},
		Rollback: func(tx *gorm.DB) error {
			drops := make([]string, len(tables))
			for i, t := range tables {
				drops[i] = "DROP TABLE IF EXISTS " + t
			}
			return execAll(tx, drops)
		},
	}
}

func execAll(tx *gorm.DB, statements []string) error {
	for _, s := range statements {
		if err := tx.Exec(s).Error; err != nil {
			return err
		}
	}
	return nil
}
