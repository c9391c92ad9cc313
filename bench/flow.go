package main

import (
	"context"
	"fmt"
	"strings"
)

// flowManyAccounts spreads the bench's operations over 10,000 accounts of
// a connector under fair flow control, each with a cap and a rate far
// above what the run reaches: the flow claim's cost when it serves many
// accounts and no limit binds. The spreading trigger (bench only) fires
// before the flow trigger, which runs in name order after it.
var flowManyAccounts = []string{
	`INSERT INTO kubun_connector_flow_account (connector_name, account_key, fair, eligible_at) VALUES ('crm', '', true, 0)`,
	`INSERT INTO kubun_connector_flow_account (connector_name, account_key, max_in_flight, rate, period_ms, burst, eligible_at)
		SELECT 'crm', 'a' || g, 1000000, 10000000, 1000, 10000000, 0 FROM generate_series(0, 9999) g`,
	`CREATE FUNCTION bench_spread_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		NEW.account_key := 'a' || (abs(hashtext(NEW.operation_id)) % 10000);
		RETURN NEW;
	END $$`,
	`CREATE TRIGGER bench_spread_accounts BEFORE INSERT ON kubun_connector_operation
		FOR EACH ROW EXECUTE FUNCTION bench_spread_accounts()`,
}

// flowVariants are the journals the flow step measures the pool on, each
// against River at its best in the same rounds.
var flowVariants = []struct {
	name string
	drop []string
}{
	{"no account under flow control (the plain claim)", nil},
	{"one account with a cap and a rate that do not bind", flowNotBinding},
	{"10,000 accounts, fair, each with a cap and a rate that do not bind", flowManyAccounts},
}

// flow measures what flow control costs the pool at its best when no
// limit binds, against River at MaxWorkers 2,000 in the same rounds: with
// no account under control (every claim then pays one probe of the flow
// table), one account, and the work spread over 10,000 accounts.
func flow(ctx context.Context, dsn string, jobs int, sizes []int, rep *report) error {
	if err := flowShapesStep(ctx, dsn, sizes, rep); err != nil {
		return err
	}
	best := throughputPairs[len(throughputPairs)-1]
	lines := []string{"Flow control, no target: the pool at its best against River at MaxWorkers 2,000, when no limit binds:"}
	for _, v := range flowVariants {
		p, err := rep.pairedRuns(ctx, dsn, jobs, best.pool, poolBatchPerWorker*best.pool, best.river, v.drop)
		if err != nil {
			return fmt.Errorf("flow %s: %w", v.name, err)
		}
		lines = append(lines, fmt.Sprintf("- %s: %.4g ops/s against %.4g, %.2f×%s; CPU per item %s",
			v.name, median(p.rates[0]), median(p.rates[1]), median(p.rounds), row{rounds: p.rounds}.spread(), p.cpuNote()))
	}
	rep.notes = append(rep.notes, strings.Join(lines, "\n"))
	return nil
}
