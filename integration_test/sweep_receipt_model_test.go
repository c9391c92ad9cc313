package integrationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// candidateRow is what a candidate row holds that a relist decides.
type candidateRow struct {
	Source *string
	Model  string
	State  string
}

func (r candidateRow) String() string {
	s := "<nil>"
	if r.Source != nil {
		s = *r.Source
	}
	return fmt.Sprintf("{%q %q %q}", s, r.Model, r.State)
}

// seedModel applies the seed's semantics to existing: each input candidate
// in input order, ON CONFLICT DO NOTHING.
func seedModel(existing map[string]candidateRow, in []repository.CandidateInput) map[string]candidateRow {
	out := make(map[string]candidateRow, len(existing)+len(in))
	for k, v := range existing {
		out[k] = v
	}
	for _, c := range in {
		if _, ok := out[c.DocumentID]; ok {
			continue
		}
		out[c.DocumentID] = candidateRow{Source: c.SourceID, Model: c.ModelID, State: models.CandidatePending}
	}
	return out
}

func storedRows(t *testing.T, db *gorm.DB, provenance string) map[string]candidateRow {
	t.Helper()
	var got []models.SweepCandidate
	require.NoError(t, db.Where("owner_did = ? AND connector_name = ? AND \"partition\" = ? AND provenance = ?",
		partition.OwnerDID, partition.ConnectorName, partition.Partition, provenance).Find(&got).Error)
	out := map[string]candidateRow{}
	for _, c := range got {
		_, dup := out[c.DocumentID]
		require.False(t, dup, "document %q stored twice", c.DocumentID)
		out[c.DocumentID] = candidateRow{Source: c.SourceID, Model: c.ModelID, State: c.State}
	}
	return out
}

func requireSameRows(t *testing.T, want, got map[string]candidateRow, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: row count", msg)
	for k, w := range want {
		g, ok := got[k]
		require.True(t, ok, "%s: %q missing", msg, k)
		require.Equal(t, w.String(), g.String(), "%s: %q", msg, k)
	}
}

// seedInsert is the seed's (pre-change) insert: the input in its own order,
// 1,000 rows per statement, every statement ON CONFLICT DO NOTHING.
func seedInsert(tx *gorm.DB, kind string, key repository.ReceiptKey, in []repository.CandidateInput, now int64) error {
	cols := []jsonrows.Col{jsonrows.Text("v_document_id"), jsonrows.Text("v_source_id"), jsonrows.Text("v_model_id")}
	for start := 0; start < len(in); start += 1000 {
		var rows [][]any
		for _, c := range in[start:min(start+1000, len(in))] {
			rows = append(rows, []any{c.DocumentID, c.SourceID, c.ModelID})
		}
		from, vars, err := jsonrows.Table(kind, "v", cols, rows)
		if err != nil {
			return err
		}
		if err := store.InsertCandidates(tx, key.OwnerDID, key.ConnectorName, key.Partition, key.Provenance,
			models.CandidatePending, now, from, vars, true); err != nil {
			return err
		}
	}
	return nil
}

var hostileDocPool = func() []string {
	var out []string
	for i, s := range hostileText {
		out = append(out, fmt.Sprintf("%s#%d", s, i), s)
	}
	out = append(out, "é", "e\u0301", "a", "A", "a ", " a", "ä", "Z", "_", "", "\u00a0")
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}()

func randomInput(r *rand.Rand, n int, tag string) []repository.CandidateInput {
	in := make([]repository.CandidateInput, n)
	for i := range in {
		var doc string
		switch r.IntN(4) {
		case 0:
			doc = hostileDocPool[r.IntN(len(hostileDocPool))]
		default:
			doc = fmt.Sprintf("doc-%05d", r.IntN(n+1))
		}
		var src *string
		if r.IntN(5) > 0 {
			src = models.StrPtr(fmt.Sprintf("%s-%d", tag, i))
		}
		in[i] = repository.CandidateInput{DocumentID: doc, SourceID: src, ModelID: fmt.Sprintf("m-%s-%d", tag, i)}
	}
	return in
}

// TestReceiptMatchesSeedModel: random inputs (repeats, hostile ids,
// sizes across the 1,000-row batches), random existing rows of the key, a
// scoped or unscoped repository, inside a caller's transaction or not,
// replays of an uncommitted receipt: the stored rows are the seed's, and
// the seed's own statements (run on a twin key) store the same rows.
func TestReceiptMatchesSeedModel(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		obs := &recordingObserver{}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Observer: obs})
		require.NoError(t, err)
		scoped, err := repo.WithScopes(ctx(t), scopes.Owner(partition.OwnerDID), scopes.Connector(partition.ConnectorName))
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(7, uint64(len(e.kind))))
		sizes := []int{0, 1, 2, 999, 1000, 1001, 2001, 2600}
		for round := range 14 {
			prov, twin := fmt.Sprintf("new-%d", round), fmt.Sprintf("seed-%d", round)
			// Existing rows of the key (orphans), in both keys alike.
			if round%3 == 1 {
				orphans := randomInput(r, 30, "orphan")
				for _, p := range []string{prov, twin} {
					for _, c := range orphans {
						require.NoError(t, e.db.Exec(`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name, "partition",
							provenance, document_id, source_id, model_id, state, attempts, apply_failures, updated_at, next_attempt_at)
							VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 1, 0) ON CONFLICT DO NOTHING`,
							partition.OwnerDID, partition.ConnectorName, partition.Partition, p, c.DocumentID, c.SourceID,
							c.ModelID, models.CandidateApplied).Error)
					}
				}
			}
			want := storedRows(t, e.db, prov)
			requireSameRows(t, want, storedRows(t, e.db, twin), "orphans")
			for replay := range 1 + round%2 {
				in := randomInput(r, sizes[r.IntN(len(sizes))], fmt.Sprintf("r%d.%d", round, replay))
				use := repo
				if round%2 == 0 {
					use = scoped
				}
				call := func(rp *repository.Repository) {
					ok, err := rp.RecordRelistReceipt(ctx(t), receipt(prov), in)
					require.NoError(t, err)
					require.True(t, ok)
				}
				if round%4 == 3 {
					require.NoError(t, use.Transaction(ctx(t), func(tx *gorm.DB, rp *repository.Repository) error {
						require.NoError(t, tx.Exec("SELECT 1").Error)
						call(rp)
						return nil
					}))
				} else {
					call(use)
				}
				require.NoError(t, e.db.Transaction(func(tx *gorm.DB) error {
					return seedInsert(tx, e.kind, receiptKey(twin), in, e.clock.Now().UnixMilli())
				}))
				want = seedModel(want, in)
				requireSameRows(t, want, storedRows(t, e.db, prov), fmt.Sprintf("round %d replay %d vs model", round, replay))
				requireSameRows(t, storedRows(t, e.db, twin), storedRows(t, e.db, prov),
					fmt.Sprintf("round %d replay %d vs seed statements", round, replay))
			}
		}
		for _, ev := range obs.take() {
			require.NotEqual(t, repository.EventReceiptRetry, ev.Kind, "no retry without a racer")
		}
	})
}

// TestReceiptManyCandidates: 25,000 candidates, reversed, a few
// repeated far apart, on a new relist and its replay: stored once each, as
// their first occurrence, plain INSERTs first, keeping ones on the replay,
// no retry.
func TestReceiptManyCandidates(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		repo, rec := recordingRepo(t, e)
		const n = 25000
		var in []repository.CandidateInput
		for i := n - 1; i >= 0; i-- {
			in = append(in, repository.CandidateInput{DocumentID: fmt.Sprintf("d%07d", i), SourceID: models.StrPtr("first"), ModelID: "m"})
		}
		for i := 0; i < n; i += 997 {
			in = append(in, repository.CandidateInput{DocumentID: fmt.Sprintf("d%07d", i), SourceID: models.StrPtr("again"), ModelID: "x"})
		}
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("big"), in)
		require.NoError(t, err)
		require.True(t, ok)
		inserts, keeping := candidateInserts(rec)
		require.Equal(t, 25, inserts)
		require.Zero(t, keeping)
		require.Equal(t, int64(n), count(t, e.db, &models.SweepCandidate{}))
		require.Zero(t, count(t, e.db, &models.SweepCandidate{}, "source_id <> ? OR model_id <> ?", "first", "m"))
		// Replay with more documents: the existing stay, the new go in.
		in = append(in, repository.CandidateInput{DocumentID: "zzz", ModelID: "m"})
		ok, err = repo.RecordRelistReceipt(ctx(t), receipt("big"), in)
		require.NoError(t, err)
		require.True(t, ok)
		inserts, keeping = candidateInserts(rec)
		require.Equal(t, 26, inserts)
		require.Equal(t, 26, keeping)
		require.Equal(t, int64(n+1), count(t, e.db, &models.SweepCandidate{}))
	})
}

// TestReceiptConcurrentRecorders: recorders of the same receipt and of
// other receipts of the same and other partitions, at once, sharing one
// input slice: no error, no retry, every document stored once, the caller's
// slice untouched, sequences consecutive.
func TestReceiptConcurrentRecorders(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		obs := &recordingObserver{}
		repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next, Observer: obs})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(3, 4))
		shared := randomInput(r, 1500, "shared")
		// Same (source, model) per document everywhere, so whichever
		// recorder lands first stores the same row.
		first := map[string]repository.CandidateInput{}
		for i, c := range shared {
			if f, ok := first[c.DocumentID]; ok {
				shared[i] = f
			} else {
				first[c.DocumentID] = c
			}
		}
		orig := slices.Clone(shared)
		var wg sync.WaitGroup
		const workers = 6
		errs := make([]error, workers*4)
		for w := range workers {
			wg.Go(func() {
				for j := range 4 {
					rec := receipt(fmt.Sprintf("prov-%d", (w+j)%3))
					rec.Partition = fmt.Sprintf("part-%d", j%2)
					in := shared
					if w%2 == 1 {
						in = shared[w*100:]
					}
					_, errs[w*4+j] = repo.RecordRelistReceipt(context.Background(), rec, in)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, orig, shared, "the caller's slice is not reordered")
		for _, ev := range obs.take() {
			require.NotEqual(t, repository.EventReceiptRetry, ev.Kind)
		}
		want := seedModel(nil, shared)
		for p := range 2 {
			for prov := range 3 {
				var got []models.SweepCandidate
				require.NoError(t, e.db.Where(`"partition" = ? AND provenance = ?`, fmt.Sprintf("part-%d", p),
					fmt.Sprintf("prov-%d", prov)).Find(&got).Error)
				require.Len(t, got, len(want))
			}
			var seqs []int64
			require.NoError(t, e.db.Model(&models.SweepReceipt{}).Where(`"partition" = ?`, fmt.Sprintf("part-%d", p)).
				Order("sequence").Pluck("sequence", &seqs).Error)
			require.Equal(t, []int64{1, 2, 3}, seqs)
		}
		_ = strings.Compare
	})
}
