package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// recordOnDoc records an update of an existing document.
func recordOnDoc(t *testing.T, e *env, id, doc string) {
	t.Helper()
	in := opInput("caller", id)
	in.Op, in.DocumentID = "update", &doc
	_, created, err := e.repo.RecordOperation(ctx(t), in)
	require.NoError(t, err)
	require.True(t, created)
}

// claimOne leases the one due operation.
func claimOne(t *testing.T, e *env) repository.Fence {
	t.Helper()
	ops := claim(t, e, 1, time.Minute)
	require.Len(t, ops, 1)
	return repository.FenceOf(&ops[0])
}

// TestRetentionKeepsNewestDeadOfDocument: operations recorded with their
// document and ended dead stay linked to it, so the newest failure a
// document shows survives retention while an older superseded one goes.
func TestRetentionKeepsNewestDeadOfDocument(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOnDoc(t, e, "older", "doc-1")
		_, err := e.repo.MarkOperationDead(ctx(t), claimOne(t, e))
		require.NoError(t, err)
		e.clock.Advance(time.Second)
		recordOnDoc(t, e, "newer", "doc-1")
		dead, err := e.repo.MarkOperationDead(ctx(t), claimOne(t, e))
		require.NoError(t, err)
		require.Equal(t, "doc-1", *dead.DocumentID, "dead keeps the recorded document")

		e.clock.Advance(time.Hour)
		require.Equal(t, int64(1), collect(t, e, e.clock.Now(), 100))
		require.Equal(t, []string{"newer"}, remaining(t, e))
		require.Zero(t, collect(t, e, e.clock.Now(), 100), "the newest dead row of a document is never collected")
	})
}

// TestCommitDocumentLink: a commit keeps the recorded document, may set
// one a create produced, and refuses to relink to another.
func TestCommitDocumentLink(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOnDoc(t, e, "upd", "doc-1")
		f := claimOne(t, e)
		other := "doc-2"
		before := snapshot(t, e, "caller", "upd")
		_, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: f, DocumentID: &other})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.ErrorContains(t, err, "linked to document doc-1")
		require.Equal(t, before, snapshot(t, e, "caller", "upd"), "a refused relink changes nothing")
		done, err := e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: f})
		require.NoError(t, err)
		require.Equal(t, "doc-1", *done.DocumentID)

		recordOp(t, e, "caller", "create")
		created := "doc-3"
		done, err = e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: claimOne(t, e), DocumentID: &created})
		require.NoError(t, err)
		require.Equal(t, "doc-3", *done.DocumentID)

		// A replayed record must name the stored document, if any.
		in := opInput("caller", "upd")
		in.DocumentID = &other
		_, _, err = e.repo.RecordOperation(ctx(t), in)
		require.ErrorIs(t, err, repository.ErrPayloadConflict)
		in.DocumentID = models.StrPtr("doc-1")
		_, created2, err := e.repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
		require.False(t, created2)
	})
}
