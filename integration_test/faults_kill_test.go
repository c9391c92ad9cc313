package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestKilledConnectionMidCall: for each write, a lock held elsewhere stalls
// the call inside its statement; its backend is terminated there. The call
// returns an error, nothing is half-written (every table's checksum is as
// before), and a retry succeeds.
func TestKilledConnectionMidCall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, e *env) any // returns state the call needs
		hold  string                         // SQL the holder runs first
		call  func(e *env, state any) error
		check func(t *testing.T, e *env)
	}{
		{"update sync progress", func(t *testing.T, e *env) any {
			require.NoError(t, e.repo.SetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, baseState(t)))
			return nil
		}, `SELECT 1 FROM kubun_connector_sync_state WHERE owner_did = 'o' FOR UPDATE`,
			func(e *env, _ any) error {
				return e.repo.UpdateSyncProgress(context.Background(), repository.UpdateSyncProgressParams{
					Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
					Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
						return repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: 9}, nil
					}})
			}, func(t *testing.T, e *env) {
				st, err := e.repo.GetSyncState(ctx(t), repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"})
				require.NoError(t, err)
				require.Equal(t, int64(1), st.Version)
			}},
		{"claim operations", func(t *testing.T, e *env) any { recordOp(t, e, "caller", "op"); return nil },
			`LOCK TABLE kubun_connector_operation IN ACCESS EXCLUSIVE MODE`,
			claimTheOne, func(t *testing.T, e *env) {
				require.NotNil(t, snapshot(t, e, "caller", "op").LeaseToken)
			}},
		// A flow claim holds its account's row and waits on its connector's
		// (a connector limit): killed there, it leaves no lease, no spent
		// rate and no moved eligible_at.
		{"flow claim", func(t *testing.T, e *env) any {
			require.NoError(t, e.repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm"},
				repository.AccountLimits{MaxInFlight: 100}))
			require.NoError(t, e.repo.SetAccountLimits(ctx(t), repository.AccountKey{ConnectorName: "crm", AccountKey: "acct"},
				repository.AccountLimits{MaxInFlight: 3, Rate: 10, Period: time.Second, Burst: 2}))
			recordOp(t, e, "caller", "op")
			return nil
		}, `SELECT 1 FROM kubun_connector_flow_account WHERE connector_name = 'crm' AND account_key = '' FOR UPDATE`,
			claimTheOne, func(t *testing.T, e *env) {
				require.NotNil(t, snapshot(t, e, "caller", "op").LeaseToken)
				var acct models.FlowAccount
				require.NoError(t, e.db.Where("connector_name = 'crm' AND account_key = 'acct'").Take(&acct).Error)
				require.NotZero(t, acct.TatMicros, "the retry spent the rate")
			}},
		{"commit operation", func(t *testing.T, e *env) any {
			recordOp(t, e, "caller", "op")
			return claimOne(t, e)
		}, `SELECT 1 FROM kubun_connector_operation WHERE operation_id = 'op' FOR UPDATE`,
			func(e *env, f any) error {
				_, err := e.repo.CommitOperation(context.Background(), repository.CommitParams{Fence: f.(repository.Fence),
					DocumentID: models.StrPtr("doc")})
				return err
			}, func(t *testing.T, e *env) {
				require.Equal(t, models.OperationCommitted, snapshot(t, e, "caller", "op").State)
			}},
		{"record relist receipt", func(*testing.T, *env) any { return nil },
			`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name, "partition", provenance,
				document_id, model_id, state, attempts, apply_failures, updated_at, next_attempt_at)
				VALUES ('owner', 'crm', 'contacts', 'p1', 'b', 'contact', 'pending', 0, 0, 1, 0)`,
			func(e *env, _ any) error {
				_, err := e.repo.RecordRelistReceipt(context.Background(), receipt("p1"), cands("a", "b"))
				return err
			}, func(t *testing.T, e *env) {
				require.Len(t, sweepSnapshot(t, e).Candidates, 2)
				require.Len(t, sweepSnapshot(t, e).Receipts, 1)
			}},
		{"commit sweep checkpoint", func(t *testing.T, e *env) any {
			recordReceipt(t, e, "p1", "a")
			setState(t, e, "p1", "a", models.CandidateApplied)
			return nil
		}, `SELECT 1 FROM kubun_connector_sweep_candidate WHERE document_id = 'a' FOR UPDATE`,
			func(e *env, _ any) error {
				_, err := e.repo.CommitSweepCheckpoint(context.Background(), receiptKey("p1"))
				return err
			}, func(t *testing.T, e *env) {
				cp, err := e.repo.GetSweepCheckpoint(ctx(t), partition)
				require.NoError(t, err)
				require.Equal(t, "p1", cp.Provenance)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, pgKind)
			state := tc.setup(t, e)
			before := checksum(t, e.db)
			holder, holderPID := lockHolder(t, e.db)
			require.NoError(t, holder.Exec(tc.hold).Error)
			done := make(chan error, 1)
			go func() { done <- tc.call(e, state) }()
			victim := waitBlockedBy(t, e.db, holderPID)
			require.NoError(t, e.db.Exec(`SELECT pg_terminate_backend(?)`, victim).Error)
			select {
			case err := <-done:
				require.Error(t, err, "the call reports the lost connection")
			case <-time.After(20 * time.Second):
				t.Fatal("the call did not return after its backend was terminated")
			}
			require.NoError(t, holder.Rollback().Error)
			require.Equal(t, before, checksum(t, e.db), "nothing half-written")
			require.NoError(t, tc.call(e, state), "a retry succeeds")
			tc.check(t, e)
		})
	}
}

// claimTheOne is the killed claim of TestKilledConnectionMidCall's claim
// cases: a claim that must lease the one operation recorded.
func claimTheOne(e *env, _ any) error {
	ops, err := e.repo.ClaimOperations(context.Background(), repository.ClaimParams{Limit: 5, LeaseFor: time.Minute})
	if err == nil && len(ops) != 1 {
		return errNoop
	}
	return err
}
