package integrationtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"
)

// orphanAndReplay stores an orphan of p1 (progressed), then records
// p1 through repo twice (a new receipt with an orphan, then a replay) and
// p2 once, and checks the rows: the orphan untouched, every document once.
func orphanAndReplay(t *testing.T, e *env, db *gorm.DB, repo *repository.Repository) {
	t.Helper()
	require.NoError(t, db.Create(&models.SweepCandidate{OwnerDID: partition.OwnerDID,
		ConnectorName: partition.ConnectorName, Partition: partition.Partition, Provenance: "p1",
		DocumentID: "doc-001200", SourceID: models.StrPtr("orphan"), ModelID: "contact",
		State: models.CandidateApplied, UpdatedAt: 1}).Error)
	for range 2 {
		ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(2500))
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p2"), append(manyCands(1500), manyCands(1500)...))
	require.NoError(t, err)
	require.True(t, ok)
	var c models.SweepCandidate
	require.NoError(t, db.Where("provenance = ? AND document_id = ?", "p1", "doc-001200").Take(&c).Error)
	require.Equal(t, "orphan", *c.SourceID)
	require.Equal(t, models.CandidateApplied, c.State)
	var n int64
	require.NoError(t, db.Model(&models.SweepCandidate{}).Count(&n).Error)
	require.Equal(t, int64(4000), n)
}

// TestReceiptBehindReadReplica: with dbresolver and an empty replica,
// the probe reads the source (it runs in the recorder's transaction):
// a replay, an orphan and a scoped caller behave as without dbresolver.
func TestReceiptBehindReadReplica(t *testing.T) {
	t.Parallel()
	for _, scoped := range []bool{false, true} {
		t.Run(fmt.Sprint("scoped=", scoped), func(t *testing.T) {
			t.Parallel()
			e := setup(t, pgKind)
			replicaDSN := pgDatabaseDSN(t)
			replica := openDSN(t, pgKind, replicaDSN)
			require.NoError(t, migrations.Migrate(context.Background(), replica))
			db := openDSN(t, pgKind, e.dsn)
			require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
			require.NoError(t, db.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.Open(replicaDSN)}})))
			repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
			require.NoError(t, err)
			if scoped {
				repo, err = repo.WithScopes(ctx(t), scopes.Owner(partition.OwnerDID))
				require.NoError(t, err)
			}
			orphanAndReplay(t, e, e.db, repo)
			var n int64
			require.NoError(t, replica.Model(&models.SweepCandidate{}).Count(&n).Error)
			require.Zero(t, n)
		})
	}
}

// TestReceiptPlainSQLite: the same on SQLite opened with the plain
// driver (deferred transactions), in and out of a caller's transaction.
func TestReceiptPlainSQLite(t *testing.T) {
	t.Parallel()
	forEachLeg(t, []dbtest.Leg{dbtest.PlainLite}, func(t *testing.T, e *env) {
		orphanAndReplay(t, e, e.db, e.repo)
		require.NoError(t, e.repo.Transaction(ctx(t), func(tx *gorm.DB, rp *repository.Repository) error {
			ok, err := rp.RecordRelistReceipt(ctx(t), receipt("p3"), append(manyCands(1200), cands("doc-000001")...))
			require.NoError(t, err)
			require.True(t, ok)
			return nil
		}))
		require.Equal(t, int64(1200), count(t, e.db, &models.SweepCandidate{}, "provenance = ?", "p3"))
	})
}

// TestReceiptICUDatabase: on a database whose default collation is
// ICU en-US, documents that collate as neighbours but differ in bytes (NFC
// and NFD, case, trailing spaces) are distinct rows, as the seed stores
// them, and repeats of each are dropped.
func TestReceiptICUDatabase(t *testing.T) {
	t.Parallel()
	for _, leg := range []dbtest.Leg{dbtest.PG, dbtest.PGPartitioned} {
		t.Run(leg.Name, func(t *testing.T) {
			t.Parallel()
			e := setupAt(t, leg, icuDatabase(t))
			db, repo := e.db, e.repo
			docs := []string{"é", "e\u0301", "a", "A", "a ", "ä", "ß", "ss", "ﬀ", "ff", "Å", "Å"}
			var in []repository.CandidateInput
			for round := range 2 {
				for i, d := range docs {
					in = append(in, repository.CandidateInput{DocumentID: d, SourceID: models.StrPtr(fmt.Sprint(round, i)), ModelID: "m"})
				}
			}
			ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), in)
			require.NoError(t, err)
			require.True(t, ok)
			got := storedRows(t, db, "p1")
			requireSameRows(t, seedModel(nil, in), got, "icu")
		})
	}
}

// TestReceiptBehindPgBouncer: the receipt paths (new, orphan, replay,
// repeats) behind PgBouncer in transaction pooling, both exec modes.
func TestReceiptBehindPgBouncer(t *testing.T) {
	t.Parallel()
	base := pgbouncerDSN(t)
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dsn := withExecMode(t, bouncedDatabase(t, base), mode)
			e := setupAt(t, dbtest.PG, dsn)
			db, repo := e.db, e.repo
			armed, plain, keeping := armRacer(t, e, db, "test:racer")
			armed.Store(false)
			orphanAndReplay(t, e, db, repo)
			require.Equal(t, int32(2), plain.Load(), "p2's batches")
			require.Equal(t, int32(6), keeping.Load(), "p1's batches, twice")
			// The racer, behind the pooler.
			require.NoError(t, db.Where("1 = 1").Delete(&models.SweepCandidate{}).Error)
			require.NoError(t, db.Where("1 = 1").Delete(&models.SweepReceipt{}).Error)
			armed.Store(true)
			ok, err := repo.RecordRelistReceipt(ctx(t), receipt("p1"), manyCands(1500))
			require.NoError(t, err)
			require.True(t, ok)
			requireRacedResult(t, e)
		})
	}
}

// TestReceiptNondeterministicDocumentCollation: a schema whose
// document_id column uses a nondeterministic (case-insensitive) ICU
// collation, as an adopted table could: "Doc" and "doc" are one key to the
// database but two documents to the Go dedup. The seed keeps the first
// occurrence (ON CONFLICT DO NOTHING), and so does the call: its plain
// INSERT meets the key and the general path, in input order, runs instead.
func TestReceiptNondeterministicDocumentCollation(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	require.NoError(t, e.db.Exec(`CREATE COLLATION nondeterministic_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`).Error)
	require.NoError(t, e.db.Exec(`ALTER TABLE kubun_connector_sweep_candidate ALTER COLUMN document_id TYPE text COLLATE nondeterministic_ci`).Error)
	in := cands("doc", "Doc", "x")
	seedErr := e.db.Transaction(func(tx *gorm.DB) error {
		return seedInsert(tx, e.kind, receiptKey("seed"), in, 1)
	})
	require.NoError(t, seedErr)
	require.Equal(t, int64(2), count(t, e.db, &models.SweepCandidate{}, "provenance = ?", "seed"))
	_, err := e.repo.RecordRelistReceipt(ctx(t), receipt("p1"), in)
	require.NoError(t, err, "the seed keeps the first occurrence")
}
