package main

import (
	"context"
	"fmt"
	"strings"
)

// rowFeed replaces the statement triggers of an UPDATE and an INSERT that
// keep retention's rows to judge and its queue of finished documents with
// one row trigger whose WHEN clause is false for a row that neither is nor
// was finished (a record, a claim, a heartbeat): PostgreSQL then never
// calls its function and keeps no transition table for those statements.
var rowFeed = []string{
	`DROP TRIGGER kubun_connector_operation_pending_ins ON kubun_connector_operation`,
	`DROP TRIGGER kubun_connector_operation_pending_upd ON kubun_connector_operation`,
	`DROP TRIGGER kubun_connector_operation_finished_ins ON kubun_connector_operation`,
	`DROP TRIGGER kubun_connector_operation_finished_upd ON kubun_connector_operation`,
	`CREATE FUNCTION kubun_connector_operation_feed() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'UPDATE' AND OLD.state IN ('committed', 'dead') THEN
			DELETE FROM kubun_connector_retention_pending WHERE ctid = (SELECT t.ctid FROM kubun_connector_retention_pending t
				WHERE t.ord = OLD.updated_at AND t.caller_did = OLD.caller_did AND t.operation_id = OLD.operation_id
				LIMIT 1 FOR UPDATE SKIP LOCKED);
			IF OLD.document_id IS NOT NULL THEN
				DELETE FROM kubun_connector_retention_held WHERE ctid = (SELECT t.ctid FROM kubun_connector_retention_held t
					WHERE t.document_id = OLD.document_id AND t.caller_did = OLD.caller_did AND t.operation_id = OLD.operation_id
					LIMIT 1 FOR UPDATE SKIP LOCKED);
			END IF;
		END IF;
		IF NEW.state IN ('committed', 'dead') THEN
			INSERT INTO kubun_connector_retention_pending (ord, updated_at, caller_did, operation_id, owner_did, connector_name)
			VALUES (NEW.updated_at, NEW.updated_at, NEW.caller_did, NEW.operation_id, NEW.owner_did, NEW.connector_name)
			ON CONFLICT (ord, caller_did, operation_id) DO UPDATE SET updated_at = excluded.updated_at,
				owner_did = excluded.owner_did, connector_name = excluded.connector_name;
			IF NEW.document_id IS NOT NULL THEN
				INSERT INTO kubun_connector_retention_finished (document_id) VALUES (NEW.document_id);
			END IF;
		END IF;
		RETURN NULL;
	END $$`,
	`CREATE TRIGGER kubun_connector_operation_feed_ins AFTER INSERT ON kubun_connector_operation
		FOR EACH ROW WHEN (NEW.state IN ('committed', 'dead')) EXECUTE FUNCTION kubun_connector_operation_feed()`,
	`CREATE TRIGGER kubun_connector_operation_feed_upd AFTER UPDATE ON kubun_connector_operation
		FOR EACH ROW WHEN ((OLD.state IN ('committed', 'dead') OR NEW.state IN ('committed', 'dead'))
			AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.updated_at IS DISTINCT FROM NEW.updated_at
				OR OLD.owner_did IS DISTINCT FROM NEW.owner_did OR OLD.connector_name IS DISTINCT FROM NEW.connector_name
				OR OLD.document_id IS DISTINCT FROM NEW.document_id OR OLD.caller_did IS DISTINCT FROM NEW.caller_did
				OR OLD.operation_id IS DISTINCT FROM NEW.operation_id OR OLD.created_at IS DISTINCT FROM NEW.created_at))
		EXECUTE FUNCTION kubun_connector_operation_feed()`,
}

// textKeys keys the listing indexes by the text key (caller, operation id)
// instead of seq, as they were before migration 0019: what keying them by
// a BIGINT bought.
var textKeys = []string{
	`DROP INDEX kubun_connector_operation_state_key_idx`,
	`DROP INDEX kubun_connector_operation_owner_idx`,
	`CREATE INDEX kubun_connector_operation_state_key_idx ON kubun_connector_operation (state, caller_did, operation_id)`,
	`CREATE INDEX kubun_connector_operation_owner_idx ON kubun_connector_operation (owner_did, created_at, caller_did, operation_id)`,
}

// flowNotBinding puts the bench's account under flow control with a cap
// and a rate far above what the run reaches: the flow claim's cost when
// limits are configured and do not bind.
var flowNotBinding = []string{
	`INSERT INTO kubun_connector_flow_account (connector_name, account_key, max_in_flight, rate, period_ms, burst, eligible_at)
		VALUES ('crm', 'a', 1000000, 10000000, 1000, 10000000, 0)`,
}

// breakdownVariants are the journals the breakdown measures the pool on,
// each against River at its best in the same rounds.
var breakdownVariants = []struct {
	name string
	drop []string
}{
	{"as shipped", nil},
	{"listing indexes keyed by the text key (before 0019)", textKeys},
	{"retention's feed as row triggers", rowFeed},
	{"without retention's feed", unreadUpkeep[4:]},
	{"without the owner and state key indexes", unreadUpkeep[:2]},
	{"without any of that upkeep", unreadUpkeep},
}

// breakdown measures the pool at its best against River at MaxWorkers
// 2,000 on each variant of the journal: what each piece of upkeep costs.
func breakdown(ctx context.Context, dsn string, jobs int, rep *report) error {
	best := throughputPairs[len(throughputPairs)-1]
	lines := []string{"Breakdown, no target: the pool at its best against River at MaxWorkers 2,000, per journal variant:"}
	for _, v := range breakdownVariants {
		p, err := rep.pairedRuns(ctx, dsn, jobs, best.pool, poolBatchPerWorker*best.pool, best.river, v.drop)
		if err != nil {
			return fmt.Errorf("breakdown %s: %w", v.name, err)
		}
		lines = append(lines, fmt.Sprintf("- %s: %.4g ops/s against %.4g, %.2f×%s; CPU per item %s",
			v.name, median(p.rates[0]), median(p.rates[1]), median(p.rounds), row{rounds: p.rounds}.spread(), p.cpuNote()))
	}
	rep.notes = append(rep.notes, strings.Join(lines, "\n"))
	return nil
}
