package integrationtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// leaseMany records and leases n operations and returns their fences.
func leaseMany(t *testing.T, e *env, prefix string, n int, leaseFor time.Duration) []repository.Fence {
	t.Helper()
	for i := range n {
		in := opInput("caller", fmt.Sprintf("%s%d", prefix, i))
		in.OwnerDID = prefix
		_, _, err := e.repo.RecordOperation(ctx(t), in)
		require.NoError(t, err)
	}
	ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: n, LeaseFor: leaseFor, OwnerDID: prefix})
	require.NoError(t, err)
	require.Len(t, ops, n)
	fs := make([]repository.Fence, n)
	for i := range ops {
		fs[i] = repository.FenceOf(&ops[i])
	}
	return fs
}

func reasonOf(t *testing.T, o repository.BatchOutcome) string {
	t.Helper()
	var lost *repository.LeaseLostError
	require.ErrorAs(t, o.Err, &lost)
	require.ErrorIs(t, o.Err, repository.ErrLeaseLost)
	return lost.Reason
}

// TestCommitOperationsOutcomes: one statement commits a batch; each item
// gets its own outcome (done, replay, lease lost with its reason, not found,
// document mismatch), and fencing holds per row.
func TestCommitOperationsOutcomes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		fs := leaseMany(t, e, "c", 4, time.Minute)
		short := leaseMany(t, e, "s", 1, time.Second)[0]
		e.clock.Advance(2 * time.Second) // short's lease expires
		stolen := fs[2]
		stolen.LeaseToken = "someone-else"
		doc := "doc-1"
		items := []repository.CommitParams{
			{Fence: fs[0], DocumentID: &doc},
			{Fence: fs[1], ResultEntity: models.JSON(`{"id":2}`)},
			{Fence: stolen},
			{Fence: short},
			{Fence: repository.Fence{CallerDID: "caller", OperationID: "nope", LeaseToken: "t"}},
		}
		repo, rec := recordingRepo(t, e)
		out, err := repo.CommitOperations(ctx(t), items)
		require.NoError(t, err)
		require.Equal(t, 1, countPrefix(rec.take(), "UPDATE"), "one statement for the batch")
		require.Len(t, out, 5)
		require.Equal(t, models.OperationCommitted, out[0].Write.State)
		require.Equal(t, "doc-1", *out[0].Write.DocumentID)
		require.JSONEq(t, `{"id":2}`, out[1].Write.ResultEntity.String())
		require.Equal(t, repository.LeaseLostHeldByOther, reasonOf(t, out[2]))
		require.Equal(t, repository.LeaseLostExpired, reasonOf(t, out[3]))
		require.ErrorIs(t, out[4].Err, repository.ErrNotFound)
		require.Equal(t, models.OperationAttempted, snapshot(t, e, "caller", "c2").State, "a refused row is untouched")

		// The same batch again: the landed commits are replays.
		again, err := e.repo.CommitOperations(ctx(t), items[:2])
		require.NoError(t, err)
		require.True(t, again[0].Write.Replay)
		require.True(t, again[1].Write.Replay)
		other := "doc-2"
		created, err := e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: fs[3], DocumentID: &other}})
		require.NoError(t, err)
		require.NoError(t, created[0].Err, "a create sets its document at commit")
		relink, err := e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: fs[3], DocumentID: &doc}})
		require.NoError(t, err)
		require.Equal(t, repository.LeaseLostFinished, reasonOf(t, relink[0]), "committed with doc-2; a different result is refused")

		_, err = e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: fs[0]}, {Fence: fs[0]}})
		require.ErrorIs(t, err, repository.ErrInvalidInput, "an operation named twice")
	})
}

// TestBatchStatementTextIndependentOfSize: a batch of 2 and one of 5 run
// the same statement text, so PostgreSQL prepares and plans it once; the
// rows travel as one value.
func TestBatchStatementTextIndependentOfSize(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		rec := newSQLRecorder()
		rec.bare = true
		repo, err := repository.New(e.db.Session(&gorm.Session{Logger: rec}),
			repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		var texts []string
		for _, n := range []int{2, 5} {
			fs := leaseMany(t, e, fmt.Sprintf("n%d", n), n, time.Minute)
			items := make([]repository.CommitParams, n)
			for i, f := range fs {
				etag := fmt.Sprintf("etag-%d", i) // a column that differs per row
				items[i] = repository.CommitParams{Fence: f, ProviderEtag: &etag}
			}
			rec.take()
			out, err := repo.CommitOperations(ctx(t), items)
			require.NoError(t, err)
			for i, o := range out {
				require.NoError(t, o.Err)
				require.Equal(t, fmt.Sprintf("etag-%d", i), *o.Write.ProviderEtag, "each row gets its own value")
			}
			stmts := rec.take()
			require.Len(t, stmts, 1)
			texts = append(texts, stmts[0])
		}
		require.Equal(t, texts[0], texts[1])
	})
}

// TestBatchGuardsPerRow: in one batch, a commit naming another document than
// the recorded one is refused while its neighbours land, one of them
// setting its document and one leaving it alone.
func TestBatchGuardsPerRow(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for i := range 3 {
			in := opInput("caller", fmt.Sprintf("g%d", i))
			in.OwnerDID = "g"
			if i == 1 {
				in.DocumentID = models.StrPtr("doc-a")
			}
			_, _, err := e.repo.RecordOperation(ctx(t), in)
			require.NoError(t, err)
		}
		ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 3, LeaseFor: time.Minute, OwnerDID: "g"})
		require.NoError(t, err)
		require.Len(t, ops, 3)
		docB, docA := "doc-b", "doc-a"
		out, err := e.repo.CommitOperations(ctx(t), []repository.CommitParams{
			{Fence: repository.FenceOf(&ops[0]), DocumentID: &docB},
			{Fence: repository.FenceOf(&ops[1]), DocumentID: &docB},
			{Fence: repository.FenceOf(&ops[2])},
		})
		require.NoError(t, err)
		require.Equal(t, "doc-b", *out[0].Write.DocumentID)
		require.ErrorIs(t, out[1].Err, repository.ErrInvalidInput, "g1 is linked to doc-a")
		require.Nil(t, out[2].Write.DocumentID)
		require.Equal(t, models.OperationAttempted, snapshot(t, e, "caller", "g1").State)
		relinked, err := e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: repository.FenceOf(&ops[1]), DocumentID: &docA}})
		require.NoError(t, err)
		require.NoError(t, relinked[0].Err, "the recorded document is accepted")
	})
}

// TestBatchedLeaseWrites: heartbeats, failures, releases and finishes in
// batches, each with per-row outcomes.
func TestBatchedLeaseWrites(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		fs := leaseMany(t, e, "b", 4, 10*time.Second)
		e.clock.Advance(5 * time.Second)
		stale := fs[3]
		stale.LeaseToken = "gone"
		hb, err := e.repo.HeartbeatOperations(ctx(t), []repository.Fence{fs[0], fs[1], stale}, time.Minute)
		require.NoError(t, err)
		require.Equal(t, e.clock.At(time.Minute).UnixMilli(), *hb[0].Write.LeaseExpiresAt)
		require.Equal(t, e.clock.At(time.Minute).UnixMilli(), *hb[1].Write.LeaseExpiresAt)
		require.Equal(t, repository.LeaseLostHeldByOther, reasonOf(t, hb[2]))

		status := int64(503)
		failed, err := e.repo.RecordOperationFailures(ctx(t), []repository.FailureParams{
			{Fence: fs[0], Kind: "http", HTTPStatus: &status}, {Fence: fs[1], Kind: "timeout"}})
		require.NoError(t, err)
		require.Equal(t, int64(1), failed[0].Write.Attempts)
		require.Equal(t, int64(503), *failed[0].Write.LastHTTPStatus)
		require.Equal(t, "timeout", *failed[1].Write.LastKind)
		require.Nil(t, failed[1].Write.LastHTTPStatus)
		replay, err := e.repo.RecordOperationFailures(ctx(t), []repository.FailureParams{{Fence: fs[0], Kind: "http", HTTPStatus: &status}})
		require.NoError(t, err)
		require.True(t, replay[0].Write.Replay)
		require.Equal(t, int64(1), snapshot(t, e, "caller", "b0").Attempts, "a replayed failure counts once")

		released, err := e.repo.ReleaseOperations(ctx(t), []repository.Fence{fs[2]})
		require.NoError(t, err)
		require.Nil(t, released[0].Write.LeaseToken)
		dead, err := e.repo.FinishOperations(ctx(t), []repository.Fence{fs[3], fs[2]}, models.OperationDead)
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, dead[0].Write.State)
		require.Equal(t, repository.LeaseLostEnded, reasonOf(t, dead[1]), "released already")
		_, err = e.repo.FinishOperations(ctx(t), fs[:1], models.OperationCommitted)
		require.ErrorIs(t, err, repository.ErrInvalidInput)
	})
}

// TestRecordOperationsBatch: one call records new operations, returns
// earlier ones as they were, and reports a changed payload per item.
func TestRecordOperationsBatch(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "old")
		changed := opInput("caller", "old")
		changed.PayloadHash = "another"
		repo, rec := recordingRepo(t, e)
		out, err := repo.RecordOperations(ctx(t), []repository.OperationInput{opInput("caller", "n1"),
			opInput("caller", "old"), opInput("caller", "n2")})
		require.NoError(t, err)
		require.Equal(t, 1, countPrefix(rec.take(), "INSERT"), "one statement records the batch")
		require.True(t, out[0].Created)
		require.False(t, out[1].Created)
		require.Equal(t, "old", out[1].Operation.OperationID)
		require.True(t, out[2].Created)
		require.Equal(t, models.OperationAttempted, out[2].Operation.State)

		again, err := e.repo.RecordOperations(ctx(t), []repository.OperationInput{changed, opInput("caller", "n1")})
		require.NoError(t, err)
		require.ErrorIs(t, again[0].Err, repository.ErrPayloadConflict)
		require.False(t, again[1].Created)
		require.Equal(t, int64(3), count(t, e.db, &models.Operation{}))

		bad := opInput("caller", "n3")
		bad.OwnerDID = ""
		_, err = e.repo.RecordOperations(ctx(t), []repository.OperationInput{opInput("caller", "n4"), bad})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
		require.Equal(t, int64(3), count(t, e.db, &models.Operation{}), "a bad item records nothing")
	})
}

// countPrefix counts the statements that start with prefix.
func countPrefix(stmts []string, prefix string) int {
	n := 0
	for _, s := range stmts {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// TestBatchAndSingleRefuseAlike: a write refused on the single path and the
// same write refused inside a batch say the same thing (action, reason,
// state): one definition per lease-holder write serves both paths.
func TestBatchAndSingleRefuseAlike(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		recordOp(t, e, "caller", "a")
		op := claim(t, e, 1, time.Minute)[0]
		stale := repository.FenceOf(&op)
		stale.LeaseToken = "not-the-token"
		for _, state := range []string{models.OperationDead, models.OperationReconcileOnly} {
			var single *repository.LeaseLostError
			if state == models.OperationDead {
				_, err := e.repo.MarkOperationDead(ctx(t), stale)
				require.ErrorAs(t, err, &single)
			} else {
				_, err := e.repo.MarkOperationReconcileOnly(ctx(t), stale)
				require.ErrorAs(t, err, &single)
			}
			out, err := e.repo.FinishOperations(ctx(t), []repository.Fence{stale}, state)
			require.NoError(t, err)
			var batched *repository.LeaseLostError
			require.ErrorAs(t, out[0].Err, &batched)
			require.Equal(t, single, batched, state)
			require.Equal(t, single.Error(), batched.Error())
		}
	})
}

// TestEveryHolderWriteRefusesAndReplaysAlike: for every lease-holder write,
// the single call and the batch of one say the same thing about the same
// row: the same refusal (action, reason, state) for a fence that does not
// hold it, and a replay, with the same stored row, for a retry of the
// write that landed.
func TestEveryHolderWriteRefusesAndReplaysAlike(t *testing.T) {
	t.Parallel()
	type pair struct {
		single func(repository.Fence) (*repository.FencedWrite, error)
		batch  func(repository.Fence) (*repository.FencedWrite, error)
		replay bool // a retry of a landed write is a replay (heartbeats extend again instead)
	}
	forEachDB(t, func(t *testing.T, e *env) {
		refusals := map[string]*repository.LeaseLostError{}
		one := func(out []repository.BatchOutcome, err error) (*repository.FencedWrite, error) {
			require.NoError(t, err)
			require.Len(t, out, 1)
			return out[0].Write, out[0].Err
		}
		status := int64(503)
		until := e.clock.At(time.Hour)
		writes := map[string]pair{
			"commit": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) {
					return e.repo.CommitOperation(ctx(t), repository.CommitParams{Fence: f})
				},
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.CommitOperations(ctx(t), []repository.CommitParams{{Fence: f}}))
				}, replay: true},
			"failure": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) {
					return e.repo.RecordOperationFailure(ctx(t), repository.FailureParams{Fence: f, Kind: "http", HTTPStatus: &status})
				},
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.RecordOperationFailures(ctx(t), []repository.FailureParams{{Fence: f, Kind: "http", HTTPStatus: &status}}))
				}, replay: true},
			"release": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) { return e.repo.ReleaseOperation(ctx(t), f) },
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.ReleaseOperations(ctx(t), []repository.Fence{f}))
				}, replay: true},
			"snooze": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) {
					return e.repo.SnoozeOperation(ctx(t), repository.SnoozeParams{Fence: f, Until: until})
				},
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.SnoozeOperations(ctx(t), []repository.SnoozeParams{{Fence: f, Until: until}}))
				}, replay: true},
			"reconcile-only": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) {
					return e.repo.MarkOperationReconcileOnly(ctx(t), f)
				},
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.FinishOperations(ctx(t), []repository.Fence{f}, models.OperationReconcileOnly))
				}, replay: true},
			"heartbeat": {
				single: func(f repository.Fence) (*repository.FencedWrite, error) {
					op, err := e.repo.HeartbeatOperation(ctx(t), f, time.Minute)
					if op == nil {
						return nil, err
					}
					return &repository.FencedWrite{Operation: op}, err
				},
				batch: func(f repository.Fence) (*repository.FencedWrite, error) {
					return one(e.repo.HeartbeatOperations(ctx(t), []repository.Fence{f}, time.Minute))
				}},
		}
		i := 0
		for name, w := range writes {
			for _, path := range []string{"single", "batch"} {
				i++
				id := fmt.Sprintf("%s-%s", name, path)
				in := opInput("caller", id)
				in.OwnerDID = id // so this claim takes this operation, whatever earlier ones left due
				_, _, err := e.repo.RecordOperation(ctx(t), in)
				require.NoError(t, err)
				ops, err := e.repo.ClaimOperations(ctx(t), repository.ClaimParams{Limit: 1, LeaseFor: time.Minute, OwnerDID: id})
				require.NoError(t, err)
				require.Len(t, ops, 1)
				op := ops[0]
				fence := repository.FenceOf(&op)
				stale := fence
				stale.LeaseToken = "not-the-token"
				call := w.single
				if path == "batch" {
					call = w.batch
				}
				// The same refusal on both paths (compared below).
				_, refusal := call(stale)
				var lost *repository.LeaseLostError
				require.ErrorAs(t, refusal, &lost, id)
				lost.Fence.OperationID = name // the ids differ by path; the rest must not
				first, err := call(fence)
				require.NoError(t, err, id)
				again, err := call(fence)
				if w.replay {
					require.NoError(t, err, id)
					require.True(t, again.Replay, "%s: a retry of the landed write is a replay", id)
					require.Equal(t, first.Operation.State, again.Operation.State, id)
				}
				refusals[name+"/"+path] = lost
			}
			require.Equal(t, refusals[name+"/single"], refusals[name+"/batch"], "%s: both paths refuse alike", name)
		}
		require.Equal(t, 2*len(writes), i)
	})
}
