package integrationtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
)

// TestBadInputMatrix: every exported repository method, given empty keys,
// oversized strings, unknown states, zero or negative limits and durations,
// times before 1970 or nil callbacks, returns ErrInvalidInput and changes no
// row of any table.
func TestBadInputMatrix(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c, r := ctx(t), e.repo
		fence, watch := seedTenant(t, e, "owner") // a row in every table
		_, err := r.SavePendingAuth(c, pendingInput(e, "s"))
		require.NoError(t, err)
		huge := strings.Repeat("x", repository.MaxKeyLength+1)
		before1970 := time.UnixMilli(-1)
		state := baseState(t)
		unknownStatus := state
		unknownStatus.Status = "paused"
		negative := state
		negative.EntityCount = -1
		badJSON := state
		badJSON.Checkpoint = models.JSON(`{"page":`)
		recompute := func(res repository.SyncProgressResult) repository.RecomputeFunc {
			return func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				return res, nil
			}
		}
		minus := -1
		opIn := func(mut func(*repository.OperationInput)) repository.OperationInput {
			in := opInput("caller", "new")
			mut(&in)
			return in
		}
		rec := func(mut func(*repository.RelistReceipt)) repository.RelistReceipt {
			r := receipt("new")
			mut(&r)
			return r
		}
		ck := candKey("p1", "x")
		ck.OwnerDID = "owner"
		auth := func(mut func(*repository.PendingAuthInput)) repository.PendingAuthInput {
			in := pendingInput(e, "new")
			mut(&in)
			return in
		}
		status := int64(99)
		before := checksum(t, e.db)
		err1 := func(_ any, err error) error { return err }
		err2 := func(_, _ any, err error) error { return err }
		cases := map[string]error{
			"GetSyncState empty owner":         err1(r.GetSyncState(c, repository.ConnectorKey{OwnerDID: "", ConnectorName: "crm"})),
			"GetSyncState oversized":           err1(r.GetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: huge})),
			"SetSyncState empty connector":     r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: ""}, state),
			"SetSyncState unknown status":      r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, unknownStatus),
			"SetSyncState negative count":      r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, negative),
			"SetSyncState malformed JSON":      r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, badJSON),
			"UpdateSyncProgress nil recompute": r.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{Key: repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}}),
			"UpdateSyncProgress negative retries": r.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
				Key:       repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
				Recompute: recompute(repository.SyncProgressResult{LastSyncedAt: "t"}), MaxRetries: &minus}),
			"UpdateSyncProgress negative result": r.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
				Key:       repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
				Recompute: recompute(repository.SyncProgressResult{LastSyncedAt: "t", EntityCount: -5})}),
			"UpdateSyncProgress malformed result": r.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
				Key: repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
				Recompute: recompute(repository.SyncProgressResult{LastSyncedAt: "t",
					Recovery: models.JSON(`[`)})}),
			"DeleteSyncState empty":       r.DeleteSyncState(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: ""}),
			"ListSyncStates zero limit":   err1(r.ListSyncStates(c, repository.ListSyncStatesParams{ConnectorName: "crm"})),
			"RecordOperation empty":       err2(r.RecordOperation(c, opIn(func(in *repository.OperationInput) { in.OwnerDID = "" }))),
			"RecordOperation oversized":   err2(r.RecordOperation(c, opIn(func(in *repository.OperationInput) { in.OperationID = huge }))),
			"RecordOperation null intent": err2(r.RecordOperation(c, opIn(func(in *repository.OperationInput) { in.ReissueIntent = models.JSON("null") }))),
			"RecordOperation empty doc": err2(r.RecordOperation(c, opIn(func(in *repository.OperationInput) {
				in.DocumentID = models.StrPtr("")
			}))),
			"GetOperation empty":               err1(r.GetOperation(c, repository.OperationKey{CallerDID: "caller", OperationID: ""})),
			"ListOperationsByOwner zero limit": err1(r.ListOperationsByOwner(c, repository.ListOperationsParams{OwnerDID: "owner"})),
			"ClaimOperations zero limit":       err1(r.ClaimOperations(c, repository.ClaimParams{LeaseFor: time.Minute})),
			"ClaimOperations negative lease":   err1(r.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: -time.Second})),
			"HeartbeatOperation zero":          err1(r.HeartbeatOperation(c, fence, 0)),
			"HeartbeatOperation empty token": err1(r.HeartbeatOperation(c, repository.Fence{CallerDID: fence.CallerDID,
				OperationID: fence.OperationID}, time.Minute)),
			"ReleaseOperation empty":         err1(r.ReleaseOperation(c, repository.Fence{})),
			"CommitOperation malformed":      err1(r.CommitOperation(c, repository.CommitParams{Fence: fence, ResultEntity: models.JSON("{")})),
			"CommitOperation empty doc":      err1(r.CommitOperation(c, repository.CommitParams{Fence: fence, DocumentID: models.StrPtr("")})),
			"MarkOperationDead empty":        err1(r.MarkOperationDead(c, repository.Fence{CallerDID: "caller-owner"})),
			"MarkReconcileOnly oversized":    err1(r.MarkOperationReconcileOnly(c, repository.Fence{CallerDID: huge, OperationID: "x", LeaseToken: "t"})),
			"RecordOperationFailure no kind": err1(r.RecordOperationFailure(c, repository.FailureParams{Fence: fence})),
			"RecordOperationFailure bad status": err1(r.RecordOperationFailure(c, repository.FailureParams{Fence: fence, Kind: "http",
				HTTPStatus: &status})),
			"ArmWatch empty document": err1(r.ArmWatch(c, repository.ArmWatchParams{WatchKey: repository.KeyOf(watch)})),
			"ArmWatch before 1970": err1(r.ArmWatch(c, repository.ArmWatchParams{WatchKey: repository.KeyOf(watch), DocumentID: "d",
				VerifyAt: before1970})),
			"GetWatch empty":                  err1(r.GetWatch(c, repository.WatchKey{})),
			"RecordVerification nil watch":    err1(r.RecordVerification(c, repository.VerificationParams{Outcome: models.WatchVerified})),
			"RecordVerification unknown":      err1(r.RecordVerification(c, repository.VerificationParams{Watch: watch, Outcome: "healthy"})),
			"RecordVerification no digest":    err1(r.RecordVerification(c, repository.VerificationParams{Watch: watch, Outcome: models.WatchVerified})),
			"ListDueOperations zero now":      err1(r.ListDueOperations(c, repository.DueParams{ReadWinners: noWinners})),
			"ListDueOperations before 1970":   err1(r.ListDueOperations(c, repository.DueParams{Now: before1970, ReadWinners: noWinners})),
			"ListDueOperations nil readers":   err1(r.ListDueOperations(c, repository.DueParams{Now: e.clock.Now()})),
			"ListDueOperations negative page": err1(r.ListDueOperations(c, repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners, PageSize: -1})),
			"IterDue nil readers":             iterErr(r, c, repository.DueParams{Now: e.clock.Now()}),
			"RecordRelistReceipt empty":       err1(r.RecordRelistReceipt(c, rec(func(r *repository.RelistReceipt) { r.Partition = "" }), nil)),
			"RecordRelistReceipt malformed":   err1(r.RecordRelistReceipt(c, rec(func(r *repository.RelistReceipt) { r.Keep = models.JSON("[") }), nil)),
			"RecordRelistReceipt candidate":   err1(r.RecordRelistReceipt(c, receipt("new"), []repository.CandidateInput{{DocumentID: huge, ModelID: "m"}})),
			"ListSweepReceipts empty":         err1(r.ListSweepReceipts(c, repository.ConnectorKey{OwnerDID: "", ConnectorName: "crm"})),
			"ListSweepCandidates zero limit":  err1(r.ListSweepCandidates(c, repository.ListCandidatesParams{OwnerDID: "owner", ConnectorName: "crm"})),
			"ListSweepCandidates before 1970": err1(r.ListSweepCandidates(c, repository.ListCandidatesParams{OwnerDID: "owner",
				ConnectorName: "crm", Limit: 1, DueAt: &before1970})),
			"RecordSweepOutcome unknown": err1(r.RecordSweepOutcome(c, repository.SweepOutcome{CandidateKey: ck, Outcome: "applied"})),
			"RecordSweepOutcome before 1970": err1(r.RecordSweepOutcome(c, repository.SweepOutcome{CandidateKey: ck,
				Outcome: models.CandidatePresent, NextAttemptAt: before1970})),
			"RecordSweepApplyFailure empty error": err1(r.RecordSweepApplyFailure(c, repository.ApplyFailure{CandidateKey: ck})),
			"MarkSweepCandidateApplied empty":     err1(r.MarkSweepCandidateApplied(c, repository.CandidateKey{ReceiptKey: ck.ReceiptKey})),
			"CommitSweepCheckpoint empty":         err1(r.CommitSweepCheckpoint(c, repository.ReceiptKey{PartitionKey: ck.PartitionKey})),
			"GetSweepCheckpoint oversized": err1(r.GetSweepCheckpoint(c, repository.PartitionKey{OwnerDID: huge, ConnectorName: "crm",
				Partition: "p"})),
			"CollectFinishedOperations zero limit":  err1(r.CollectFinishedOperations(c, repository.CollectParams{Before: e.clock.Now()})),
			"CollectFinishedOperations zero before": err1(r.CollectFinishedOperations(c, repository.CollectParams{Limit: 10})),
			"CollectFinishedOperations before 1970": err1(r.CollectFinishedOperations(c, repository.CollectParams{Before: before1970, Limit: 10})),
			"SavePendingAuth empty verifier":        err1(r.SavePendingAuth(c, auth(func(in *repository.PendingAuthInput) { in.CodeVerifier = "" }))),
			"SavePendingAuth relative URI":          err1(r.SavePendingAuth(c, auth(func(in *repository.PendingAuthInput) { in.RedirectURI = "/cb" }))),
			"SavePendingAuth already expired": err1(r.SavePendingAuth(c, auth(func(in *repository.PendingAuthInput) {
				in.ExpiresAt = e.clock.Now()
			}))),
			"ConsumePendingAuth empty":     err1(r.ConsumePendingAuth(c, repository.ConsumeParams{State: "s", OwnerDID: "owner"})),
			"PurgePendingAuths zero limit": err1(r.PurgePendingAuths(c, repository.PurgeParams{Before: e.clock.Now()})),
			"WithScopes unknown column":    err1(r.WithScopes(c, scopes.Eq("tenant", 1))),
			"New unknown lease clock":      err1(repository.New(e.db, repository.Options{LeaseClock: 7})),
		}
		// Every call above ran once, as the map was built, before any check.
		after := checksum(t, e.db)
		for name, err := range cases {
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
		}
		require.Equal(t, before, after, "bad input changed no row of any table")
	})
}

// iterErr drains the streaming sweep and returns its error.
func iterErr(r *repository.Repository, c context.Context, p repository.DueParams) error {
	for _, err := range r.IterDue(c, p) {
		if err != nil {
			return err
		}
	}
	return nil
}
