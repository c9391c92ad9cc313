package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestUnstorableTextRefused: a key or a string field holding invalid UTF-8
// or a NUL byte (PostgreSQL refuses both with SQLSTATE 22021, SQLite stores
// them) is ErrInvalidInput on both databases, on the single and the batched
// path alike (a bad item among good ones fails its batch), and changes no
// row. Valid text of every kind is still stored.
func TestUnstorableTextRefused(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		c, r := ctx(t), e.repo
		fs := leaseMany(t, e, "t", 2, time.Hour)
		for name, bad := range map[string]string{"invalid UTF-8": "a\xffb", "NUL": "a\x00b"} {
			before := checksum(t, e.db)
			badOp := opInput("caller", "new")
			badOp.Target = bad
			badKey := opInput(bad, "new")
			badState := baseState(t)
			badState.LastSyncedAt = bad
			badError := baseState(t)
			badError.Error = &bad
			badDoc := baseState(t)
			badDoc.Checkpoint = models.JSON(`{"s":"` + bad + `"}`)
			if name == "NUL" {
				badDoc.Checkpoint = models.JSON(`{"s":"a\u00ffb"}`) // a NUL can only be escaped in JSON: valid text
			}
			good := opInput("caller", "good")
			etag := bad
			badAuth := pendingInput(e, "s")
			badAuth.Scopes = []string{"ok", bad}
			errOf := func(_ any, err error) error { return err }
			errOf3 := func(_, _ any, err error) error { return err }
			result := func(res repository.SyncProgressResult) error {
				return r.UpdateSyncProgress(c, repository.UpdateSyncProgressParams{
					Key: repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"},
					Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
						return res, nil
					}})
			}
			cases := map[string]error{
				"RecordOperation field":          errOf3(r.RecordOperation(c, badOp)),
				"RecordOperation key":            errOf3(r.RecordOperation(c, badKey)),
				"RecordOperations field":         errOf(r.RecordOperations(c, []repository.OperationInput{good, badOp})),
				"RecordOperations key":           errOf(r.RecordOperations(c, []repository.OperationInput{good, badKey})),
				"GetOperation key":               errOf(r.GetOperation(c, repository.OperationKey{CallerDID: bad, OperationID: "x"})),
				"SetSyncState field":             r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}, badState),
				"SetSyncState error":             r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}, badError),
				"SetSyncState key":               r.SetSyncState(c, repository.ConnectorKey{OwnerDID: bad, ConnectorName: "crm"}, baseState(t)),
				"UpdateSyncProgress result":      result(repository.SyncProgressResult{LastSyncedAt: bad}),
				"UpdateSyncProgress result err":  result(repository.SyncProgressResult{LastSyncedAt: "t", Error: &bad}),
				"CommitOperation etag":           errOf(r.CommitOperation(c, repository.CommitParams{Fence: fs[0], ProviderEtag: &etag})),
				"CommitOperations etag":          errOf(r.CommitOperations(c, []repository.CommitParams{{Fence: fs[1]}, {Fence: fs[0], ProviderEtag: &etag}})),
				"RecordOperationFailure kind":    errOf(r.RecordOperationFailure(c, repository.FailureParams{Fence: fs[0], Kind: bad})),
				"RecordOperationFailures kind":   errOf(r.RecordOperationFailures(c, []repository.FailureParams{{Fence: fs[1], Kind: "http"}, {Fence: fs[0], Kind: bad}})),
				"SavePendingAuth scope":          errOf(r.SavePendingAuth(c, badAuth)),
				"RecordRelistReceipt candidate":  errOf(r.RecordRelistReceipt(c, receipt("p-bad"), cands("ok", bad))),
				"ListSyncStates connector":       errOf(r.ListSyncStates(c, repository.ListSyncStatesParams{ConnectorName: bad, Limit: 1})),
				"ClaimOperations owner (a read)": errOf(r.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Minute, OwnerDID: bad})),
			}
			if name != "NUL" {
				cases["SetSyncState JSON"] = r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "owner", ConnectorName: "crm"}, badDoc)
			} else {
				require.NoError(t, r.SetSyncState(c, repository.ConnectorKey{OwnerDID: "escaped", ConnectorName: "crm"}, badDoc), "escaped text is text")
				require.NoError(t, r.DeleteSyncState(c, repository.ConnectorKey{OwnerDID: "escaped", ConnectorName: "crm"}))
			}
			for what, err := range cases {
				require.ErrorIs(t, err, repository.ErrInvalidInput, "%s: %s", name, what)
			}
			require.Equal(t, before, checksum(t, e.db), "%s: nothing changed", name)
		}
		_, _, err := r.RecordOperation(c, func() repository.OperationInput {
			in := opInput("caller", "ünïcödé-✓")
			in.Target = "日本語"
			return in
		}())
		require.NoError(t, err, "valid UTF-8 of any script is stored")
	})
}
