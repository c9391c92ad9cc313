package integrationtest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/scopes"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// hostileText are strings a batch's row source could misread (an array
// literal's or JSON's quoting, escapes, separators and nulls, SQL's
// comments and placeholders): every batched path must store each as given.
var hostileText = []string{
	`x"y`, `back\slash`, `\`, `\\`, `"`, `\"`, `"\`, `{a,b}`, `{`, `}`, `}{`, `,`, " spaced ", " ", "\t",
	"\ttab\n", "\r\n", "\v\f", "NULL", "null", "Null", `"NULL"`, "NULL ", " NULL", "é\u2028\u2029", "\u00a0nbsp\u00a0",
	"'", "''", "$1", "?", "--", "/*", "😀", "\u0085", "\ufeffbom", `{"a":1}`, `[1:2]={1,2}`, "a\\\"b", strings.Repeat(`\"{,}`, 150),
	strings.Repeat("x", 900),
}

// hostileRoundTrip records, claims, heartbeats, fails, re-claims, commits
// and replays one operation per hostile string through repo, the string in
// every column a batch carries, and reads each back as it was given.
func hostileRoundTrip(t *testing.T, e *env, db *gorm.DB, repo *repository.Repository, owner string) {
	c := ctx(t)
	var ins []repository.OperationInput
	for i, s := range hostileText {
		in := opInput(s, fmt.Sprintf("%s:%s#%d", owner, s, i))
		in.OwnerDID = owner
		ins = append(ins, in)
	}
	out, err := repo.RecordOperations(c, ins)
	require.NoError(t, err)
	for i, o := range out {
		require.NoError(t, o.Err, "item %d", i)
	}
	ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: len(ins), LeaseFor: time.Hour, OwnerDID: owner})
	require.NoError(t, err)
	require.Len(t, ops, len(ins))
	// Heartbeat all, release all, claim again.
	fs := make([]repository.Fence, len(ops))
	for i := range ops {
		fs[i] = repository.FenceOf(&ops[i])
	}
	hb, err := repo.HeartbeatOperations(c, fs, time.Hour)
	require.NoError(t, err)
	for i, o := range hb {
		require.NoError(t, o.Err, "heartbeat %d %q", i, fs[i].CallerDID)
	}
	// failures: hostile kinds, mixed statuses
	var fps []repository.FailureParams
	for i := range fs {
		var st *int64
		if i%2 == 0 {
			v := int64(500 + i)
			st = &v
		}
		fps = append(fps, repository.FailureParams{Fence: fs[i], Kind: hostileText[i], HTTPStatus: st})
	}
	fo, err := repo.RecordOperationFailures(c, fps)
	require.NoError(t, err)
	for i, o := range fo {
		require.NoError(t, o.Err, "failure %d %q", i, fs[i].CallerDID)
	}
	for i, f := range fs {
		var op models.Operation
		require.NoError(t, db.Where("caller_did = ? AND operation_id = ?", f.CallerDID, f.OperationID).Take(&op).Error)
		require.NotNil(t, op.LastKind)
		require.Equal(t, hostileText[i], *op.LastKind, "kind %d", i)
		if i%2 == 0 {
			require.NotNil(t, op.LastHTTPStatus)
			require.Equal(t, int64(500+i), *op.LastHTTPStatus)
		} else {
			require.Nil(t, op.LastHTTPStatus)
		}
	}
	// Make them due and claim again.
	require.NoError(t, db.Exec("UPDATE kubun_connector_operation SET next_attempt_at = 0 WHERE owner_did = ?", owner).Error)
	ops, err = repo.ClaimOperations(c, repository.ClaimParams{Limit: len(ins), LeaseFor: time.Hour, OwnerDID: owner})
	require.NoError(t, err)
	require.Len(t, ops, len(ins))
	byCaller := map[string]int{}
	for i, s := range hostileText {
		byCaller[s] = i
	}
	commits := make([]repository.CommitParams, len(ops))
	for k := range ops {
		i := byCaller[ops[k].CallerDID]
		doc := "doc" + hostileText[i]
		etag := hostileText[i]
		if i%3 == 0 {
			etag = ""
		}
		enc, _ := json.Marshal(map[string]string{"s": hostileText[i]})
		commits[k] = repository.CommitParams{Fence: repository.FenceOf(&ops[k]), DocumentID: &doc, ProviderEtag: &etag, ResultEntity: models.JSON(enc)}
		if i%4 == 1 {
			commits[k].ProviderEtag = nil
		}
	}
	first, err := repo.CommitOperations(c, commits)
	require.NoError(t, err)
	for k, o := range first {
		require.NoError(t, o.Err, "commit %d %q", k, commits[k].CallerDID)
		require.False(t, o.Write.Replay)
	}
	replay, err := repo.CommitOperations(c, commits)
	require.NoError(t, err)
	for k, o := range replay {
		require.NoError(t, o.Err, "replay %d %q", k, commits[k].CallerDID)
		require.True(t, o.Write.Replay, "replay %d %q", k, commits[k].CallerDID)
	}
	for _, p := range commits {
		var op models.Operation
		require.NoError(t, db.Where("caller_did = ? AND operation_id = ?", p.CallerDID, p.OperationID).Take(&op).Error)
		require.Equal(t, models.OperationCommitted, op.State)
		require.Equal(t, *p.DocumentID, *op.DocumentID)
		if p.ProviderEtag == nil {
			require.Nil(t, op.ProviderEtag)
		} else {
			require.NotNil(t, op.ProviderEtag, "etag of %q", p.CallerDID)
			require.Equal(t, *p.ProviderEtag, *op.ProviderEtag)
		}
		require.JSONEq(t, string(p.ResultEntity), string(op.ResultEntity))
	}
}

// TestHostileTextInBatches: every batched write and lookup stores and
// finds the hostile strings as given, on every leg.
func TestHostileTextInBatches(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		hostileRoundTrip(t, e, e.db, e.repo, "arr")
	})
}

// TestHostileTextInScopedBatches: the same through a repository scoped to
// a hostile owner (the scope admission's keys travel as a row source too).
func TestHostileTextInScopedBatches(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		owner := `o"{,}\ NULL `
		scoped, err := e.repo.WithScopes(ctx(t), scopes.Owner(owner))
		require.NoError(t, err)
		hostileRoundTrip(t, e, e.db, scoped, owner)
	})
}

// TestHostileTextInBatchesEveryExecMode: the same under pgx's simple
// protocol (as PgBouncer users configure it) and its other exec modes.
func TestHostileTextInBatchesEveryExecMode(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		for _, mode := range []string{"prefer", "simple_protocol", "exec", "describe_exec"} {
			t.Run(mode, func(t *testing.T) {
				var db *gorm.DB
				var err error
				if mode == "prefer" {
					db, err = gorm.Open(postgres.New(postgres.Config{DSN: e.dsn, PreferSimpleProtocol: true}), &gorm.Config{Logger: logger.Discard})
				} else {
					db, err = gorm.Open(postgres.Open(withExecMode(t, e.dsn, mode)), &gorm.Config{Logger: logger.Discard})
				}
				require.NoError(t, err)
				require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
				repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
				require.NoError(t, err)
				hostileRoundTrip(t, e, db, repo, "arr-"+mode)
			})
		}
	})
}

// TestHostileTextInCandidates: a relist's candidates keep hostile ids and
// their NULL source ids.
func TestHostileTextInCandidates(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		var in []repository.CandidateInput
		for i, s := range hostileText {
			src := s
			var sp *string = &src
			if i%5 == 0 {
				sp = nil
			}
			in = append(in, repository.CandidateInput{DocumentID: fmt.Sprintf("%s#%d", s, i), SourceID: sp, ModelID: "m" + s})
		}
		ok, err := e.repo.RecordRelistReceipt(ctx(t), receipt("p"), in)
		require.NoError(t, err)
		require.True(t, ok)
		for _, c := range in {
			got := candidate(t, e, "p", c.DocumentID)
			require.Equal(t, c.ModelID, got.ModelID)
			if c.SourceID == nil {
				require.Nil(t, got.SourceID, c.DocumentID)
			} else {
				require.NotNil(t, got.SourceID, c.DocumentID)
				require.Equal(t, *c.SourceID, *got.SourceID)
			}
		}
	})
}

// TestHostileLeaseTokens: lease tokens (from NewIDFunc) holding what an
// array literal or JSON could misread still fence batched writes, on every leg.
func TestHostileLeaseTokens(t *testing.T) {
	t.Parallel()
	forEachLeg(t, dbtest.All(), func(t *testing.T, e *env) {
		var mu sync.Mutex
		k := 0
		newID := func() string {
			mu.Lock()
			defer mu.Unlock()
			k++
			return hostileText[k%len(hostileText)] + fmt.Sprint(k)
		}
		_, repo := instance(t, e, repository.Options{NewIDFunc: newID})
		c := ctx(t)
		var ins []repository.OperationInput
		for i := range 30 {
			in := opInput("c", fmt.Sprintf("lt%d", i))
			in.OwnerDID = "lt"
			ins = append(ins, in)
		}
		_, err := repo.RecordOperations(c, ins)
		require.NoError(t, err)
		ops, err := repo.ClaimOperations(c, repository.ClaimParams{Limit: 30, LeaseFor: time.Hour, OwnerDID: "lt"})
		require.NoError(t, err)
		require.Len(t, ops, 30)
		fs := make([]repository.Fence, len(ops))
		for i := range ops {
			fs[i] = repository.FenceOf(&ops[i])
		}
		hb, err := repo.HeartbeatOperations(c, fs, 2*time.Hour)
		require.NoError(t, err)
		for i, o := range hb {
			require.NoError(t, o.Err, "heartbeat %d token %q", i, fs[i].LeaseToken)
		}
		// A wrong token (a prefix of the real one) must be refused.
		bad := fs[0]
		bad.LeaseToken = strings.TrimRight(bad.LeaseToken, "0123456789")
		rel, err := repo.ReleaseOperations(c, []repository.Fence{bad, fs[1]})
		require.NoError(t, err)
		require.Error(t, rel[0].Err)
		require.NoError(t, rel[1].Err)
		fin, err := repo.FinishOperations(c, fs[2:], models.OperationDead)
		require.NoError(t, err)
		for i, o := range fin {
			require.NoError(t, o.Err, "finish %d token %q", i, fs[i+2].LeaseToken)
		}
		require.Equal(t, int64(28), count(t, e.db, &models.Operation{}, "state = ?", models.OperationDead))
	})
}

// TestLargeResultsInABatch: a batched commit of results of 1 MB each, full of
// quotes and backslashes.
func TestLargeResultsInABatch(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		fs := leaseMany(t, e, "big", 8, time.Hour)
		commits := make([]repository.CommitParams, len(fs))
		for i := range fs {
			enc, _ := json.Marshal(map[string]string{"s": strings.Repeat(`"\{,}`, 200_000) + fmt.Sprint(i)})
			commits[i] = repository.CommitParams{Fence: fs[i], ResultEntity: models.JSON(enc)}
		}
		out, err := e.repo.CommitOperations(ctx(t), commits)
		require.NoError(t, err)
		for i, o := range out {
			require.NoError(t, o.Err)
			require.Equal(t, string(commits[i].ResultEntity), string(o.Write.Operation.ResultEntity))
		}
	})
}

// TestBatchNullsWithArrayNullsOff: array_nulls is a PostgreSQL setting a
// role or database may carry (ALTER ROLE … SET array_nulls = off); a
// batch's NULLs stay NULLs under it. (An array-literal row source stored
// the text "NULL" for them, or failed a bigint column.)
func TestBatchNullsWithArrayNullsOff(t *testing.T) {
	t.Parallel()
	forEachPG(t, func(t *testing.T, e *env) {
		u, err := url.Parse(e.dsn)
		require.NoError(t, err)
		q := u.Query()
		q.Set("array_nulls", "off") // a startup parameter, as ALTER ROLE/DATABASE SET would give
		u.RawQuery = q.Encode()
		db := openDSN(t, e.kind, u.String())
		var setting string
		require.NoError(t, db.Raw("SHOW array_nulls").Scan(&setting).Error)
		require.Equal(t, "off", setting)
		require.NoError(t, db.Use(hooks.New(hooks.Config{NewIDFunc: e.ids.Next})))
		repo, err := repository.New(db, repository.Options{NowFunc: e.clock.Now, NewIDFunc: e.ids.Next})
		require.NoError(t, err)
		c := ctx(t)

		in := []repository.CandidateInput{{DocumentID: "d1", SourceID: nil, ModelID: "m"}, {DocumentID: "d2", SourceID: models.StrPtr("s2"), ModelID: "m"}}
		ok, err := repo.RecordRelistReceipt(c, receipt("p"), in)
		require.NoError(t, err)
		require.True(t, ok)
		require.Nil(t, candidate(t, e, "p", "d1").SourceID, "a nil source id")

		fs := leaseMany(t, e, "an", 2, time.Hour)
		etag := "e"
		out, err := repo.CommitOperations(c, []repository.CommitParams{{Fence: fs[0]}, {Fence: fs[1], ProviderEtag: &etag}})
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		require.Nil(t, out[0].Write.ProviderEtag, "a nil etag")

		fs = leaseMany(t, e, "af", 2, time.Hour)
		st := int64(503)
		fo, err := repo.RecordOperationFailures(c, []repository.FailureParams{{Fence: fs[0], Kind: "k"}, {Fence: fs[1], Kind: "k", HTTPStatus: &st}})
		require.NoError(t, err, "a bigint column NULL in one row")
		require.NoError(t, fo[0].Err)
		require.Nil(t, fo[0].Write.LastHTTPStatus)
	})
}

// TestBatchTextInASQLASCIIDatabase: in a database whose encoding is
// SQL_ASCII, a batch stores what a batch of one stores. (encoding/json
// wrote U+2028 and U+2029 as escapes, which such a server cannot decode:
// a batch of two failed where a batch of one, bound as it is, stored them.)
func TestBatchTextInASQLASCIIDatabase(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t, os.Getenv(pgEnv), dbtest.SchemaDSN(t, ""), "ascii_",
		"ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
	e := setupAt(t, dbtest.PG, dsn)
	c := ctx(t)
	for i, s := range []string{"é plain", "line\u2028sep", "para\u2029sep", "ctl\x01\x1f"} {
		fs := leaseMany(t, e, fmt.Sprintf("ascii%d-", i), 3, time.Hour)
		etags := []string{s + "-1", s + "-2", s + "-3"}
		out, err := e.repo.CommitOperations(c, []repository.CommitParams{{Fence: fs[0], ProviderEtag: &etags[0]}})
		require.NoError(t, err, "a batch of one, %q", s)
		require.NoError(t, out[0].Err)
		out, err = e.repo.CommitOperations(c, []repository.CommitParams{{Fence: fs[1], ProviderEtag: &etags[1]},
			{Fence: fs[2], ProviderEtag: &etags[2]}})
		require.NoError(t, err, "a batch of two, %q", s)
		for k, o := range out {
			require.NoError(t, o.Err)
			require.Equal(t, etags[k+1], *o.Write.ProviderEtag)
		}
		in := []repository.CandidateInput{{DocumentID: s + "#1", SourceID: &etags[0], ModelID: "m"}, {DocumentID: s + "#2", ModelID: "m"}}
		ok, err := e.repo.RecordRelistReceipt(c, receipt(fmt.Sprint("p", i)), in)
		require.NoError(t, err, "candidates %q", s)
		require.True(t, ok)
		require.Equal(t, etags[0], *candidate(t, e, fmt.Sprint("p", i), s+"#1").SourceID)
	}
}
