package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// binary is the connstore command built once for the package's tests: they
// run it as an operator would, checking its output and exit status.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "connstore-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "connstore")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

// ok runs the binary and requires success.
func ok(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	r := runCLI(t, nil, append([]string{"-dsn", dsn}, args...)...)
	require.Equal(t, 0, r.code, "connstore %v: %s", args, r.stderr)
	require.Empty(t, r.stderr)
	return r.stdout
}

// fails runs the binary and requires exit status code with one line on
// stderr containing want.
func fails(t *testing.T, code int, want string, env []string, args ...string) {
	t.Helper()
	r := runCLI(t, env, args...)
	require.Equal(t, code, r.code, "connstore %v: %s", args, r.stdout)
	first, _, _ := strings.Cut(r.stderr, "\n")
	require.True(t, strings.HasPrefix(first, "connstore: "), r.stderr)
	require.Contains(t, first, want)
	if code == 1 {
		require.Equal(t, first+"\n", r.stderr, "a failure is one line")
	}
}

func TestUsageErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		env  []string
		args []string
		want string
	}{
		"unknown command": {args: []string{"-dsn", "x.db", "ops", "explode"}, want: `unknown command "ops explode"`},
		"no command":      {args: []string{"-dsn", "x.db"}, want: "a command is required"},
		"unknown group":   {args: []string{"-dsn", "x.db", "frob"}, want: `unknown command "frob"`},
		"group alone":     {args: []string{"-dsn", "x.db", "ops"}, want: "ops needs one of: cancel, cancel-matching, counts, list, requeue, requeue-matching, show"},
		"unknown flag":    {args: []string{"ops", "counts", "-bogus"}, want: "flag provided but not defined"},
		"no dsn":          {env: []string{"CONNSTORE_DSN="}, args: []string{"ops", "counts"}, want: "no database"},
		"missing args":    {args: []string{"-dsn", "x.db", "ops", "requeue"}, want: "takes 1 arguments (CALLER/OPERATION), got 0"},
		"two-part key":    {args: []string{"-dsn", "x.db", "ops", "requeue", "caller", "op"}, want: "takes 1 arguments (CALLER/OPERATION), got 2"},
		"key, no slash":   {args: []string{"-dsn", "x.db", "ops", "show", "caller"}, want: `"caller" is not CALLER/OPERATION: no slash`},
		"bad quoting":     {args: []string{"-dsn", "x.db", "ops", "show", `"caller/op`}, want: "its quoted first part does not end"},
		"help":            {args: []string{"ops", "list", "-h"}, want: "flags"},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, 2, tc.want, tc.env, tc.args...)
		})
	}
}

func TestBadDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	fails(t, 1, "no such file", nil, "-dsn", missing, "ops", "counts")
	_, err := os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "a mistyped path must not create a database")
	fails(t, 1, "not a valid PostgreSQL DSN", nil, "-dsn", "postgres://a:b@[::1/x", "ops", "counts")
	fails(t, 1, "connect", nil, "-dsn", "postgres://connstore@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", "migrate", "status")
}

// database is one database the CLI is run against, with a repository the
// test seeds it through.
type database struct {
	dsn  string
	repo *repository.Repository
}

func forEachDB(t *testing.T, fn func(t *testing.T, d database)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "cli.db")
		ok(t, path, "migrate", "up")
		db, err := sqliteconn.Open(path, sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
		require.NoError(t, err)
		fn(t, database{path, seedRepo(t, db)})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := connstoretest.SchemaDSN(t, "")
		ok(t, dsn, "migrate", "up")
		db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		fn(t, database{dsn, seedRepo(t, db)})
	})
}

func seedRepo(t *testing.T, db *gorm.DB) *repository.Repository {
	t.Helper()
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	require.NoError(t, db.Use(hooks.New(hooks.Config{})))
	repo, err := repository.New(db, repository.Options{})
	require.NoError(t, err)
	return repo
}

func TestMigrate(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		require.Contains(t, ok(t, d.dsn, "migrate", "up"), "applied 0 migrations")
		var status struct {
			Migrations []struct {
				ID      string `json:"id"`
				Applied bool   `json:"applied"`
			} `json:"migrations"`
		}
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "migrate", "status", "-json")), &status))
		require.NotEmpty(t, status.Migrations)
		for _, m := range status.Migrations {
			require.True(t, m.Applied, m.ID)
		}
		table := ok(t, d.dsn, "migrate", "status")
		require.Contains(t, table, "MIGRATION")
		require.NotRegexp(t, `\spending\n`, table)
	})
}

func record(t *testing.T, repo *repository.Repository, id string) {
	t.Helper()
	_, _, err := repo.RecordOperation(t.Context(), repository.OperationInput{
		CallerDID: "did:key:caller", OperationID: id, NodeKey: "node-" + id, OwnerDID: "did:key:owner", ConnectorName: "crm",
		Model: "contact", Op: "create", AccountKey: "acct", Target: "contacts", DeterministicEventID: "evt-" + id,
		PayloadHash: "hash-" + id, ReissueIntent: models.JSON(`{}`)})
	require.NoError(t, err)
}

func TestOps(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		for _, id := range []string{"op-1", "op-2", "op-3"} {
			record(t, d.repo, id)
		}
		claimed, err := d.repo.ClaimOperations(t.Context(), repository.ClaimParams{Limit: 2, LeaseFor: time.Hour})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		_, err = d.repo.MarkOperationDead(t.Context(), repository.FenceOf(&claimed[0]))
		require.NoError(t, err)

		table := ok(t, d.dsn, "ops", "counts")
		require.Regexp(t, `crm\s+did:key:owner\s+attempted\s+2\s+1\s+1\s+0`, table)
		require.Regexp(t, `crm\s+did:key:owner\s+dead\s+1\s+0\s+0\s+0`, table)
		var counts []countView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "ops", "counts", "-json", "-states", "dead")), &counts))
		require.Equal(t, []countView{{Connector: "crm", Owner: "did:key:owner", State: "dead", Count: 1}}, counts)

		var dead []opView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "-json", "ops", "list", "-state", "dead")), &dead))
		require.Len(t, dead, 1)
		require.Equal(t, claimed[0].OperationID, dead[0].Operation)
		require.Contains(t, ok(t, d.dsn, "ops", "list", "-state", "attempted", "-limit", "1", "-after", "did:key:caller/op-1"), "op-2")

		require.Contains(t, ok(t, d.dsn, "ops", "requeue", "did:key:caller/"+claimed[0].OperationID, "-reset-attempts"), "requeued")
		fails(t, 1, `"attempted", not one of`, nil, "-dsn", d.dsn, "ops", "requeue", "did:key:caller/"+claimed[0].OperationID)
		fails(t, 1, "not found", nil, "-dsn", d.dsn, "ops", "requeue", "did:key:caller/nope")

		held := claimed[1].OperationID
		fails(t, 1, "live lease", nil, "-dsn", d.dsn, "ops", "cancel", "did:key:caller/"+held)
		require.Contains(t, ok(t, d.dsn, "ops", "cancel", "did:key:caller/"+held, "-force"), "cancelled")
		op, err := d.repo.GetOperation(t.Context(), repository.OperationKey{CallerDID: "did:key:caller", OperationID: held})
		require.NoError(t, err)
		require.Equal(t, models.OperationDead, op.State)
		require.Equal(t, repository.CancelledKind, *op.LastKind)
	})
}

func TestSyncAndMaintenance(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		require.NoError(t, d.repo.SetSyncState(t.Context(), repository.ConnectorKey{OwnerDID: "did:key:owner", ConnectorName: "crm"}, repository.SyncStateInput{
			LastSyncedAt: "2026-12-01", EntityCount: 12, Status: models.SyncStatusSyncing}))
		fails(t, 2, "needs -connector", nil, "-dsn", d.dsn, "sync", "list")
		require.Regexp(t, `crm\s+did:key:owner\s+syncing\s+12`, ok(t, d.dsn, "sync", "list", "-connector", "crm"))

		var row syncView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "sync", "set-status", "-json", "-connector", "crm",
			"-owner", "did:key:owner", "-status", "error", "-error", "token revoked", "-if-status", "syncing")), &row))
		require.Equal(t, "error", row.Status)
		require.Equal(t, "token revoked", *row.Error)
		require.Equal(t, int64(12), row.EntityCount)
		fails(t, 1, `"error", not one of`, nil, "-dsn", d.dsn, "sync", "set-status", "-connector", "crm",
			"-owner", "did:key:owner", "-status", "idle", "-if-status", "syncing")
		fails(t, 1, "invalid input", nil, "-dsn", d.dsn, "sync", "set-status", "-connector", "crm",
			"-owner", "did:key:owner", "-status", "paused")

		require.Contains(t, ok(t, d.dsn, "retention", "run", "-older-than", "1h"), "deleted 0 finished operations")
		var purged struct{ Deleted int64 }
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "auth", "purge", "-json")), &purged))
		require.Zero(t, purged.Deleted)
	})
}
