package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestErrorText: errors name keys as owner/connector/partition (and the
// like), say the reason once and what to do about it.
func TestErrorText(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordReceipt(t, e, "p1", "a")
		_, err := e.repo.CommitSweepCheckpoint(ctx(t), receiptKey("p1"))
		require.EqualError(t, err, "commit sweep checkpoint owner/crm/contacts@p1: refused: receipt has unresolved "+
			"candidates; apply or refuse each of its candidates, then commit again")

		_, err = e.repo.GetSweepCheckpoint(ctx(t), partition)
		require.EqualError(t, err, "get sweep checkpoint owner/crm/contacts: connstore: not found: record not found")

		_, err = e.repo.GetWatch(ctx(t), repository.WatchKey{OwnerDID: "o", ConnectorName: "c", Model: "m", AccountKey: "a", SourceID: "s"})
		require.EqualError(t, err, "get watch o/c/m/a/s: connstore: not found: record not found")

		recordOp(t, e, "caller", "op")
		f := claimOne(t, e)
		e.clock.Advance(2 * time.Minute)
		_, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: f})
		require.EqualError(t, err, "commit caller/op: lease lost: lease expired; heartbeat more often than the "+
			"lease lasts; claim it again to retry")
	})
}
