package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// awkward are key parts an operator meets: plain ones, slashes, white
// space, control characters, quotes, percent-encoding, markup, invalid
// UTF-8.
var awkward = []string{"plain", "a/b/c", "sp ace", "tab\there", "new\nline", `"quoted"`, `"`, "-dash", "did:web:h%3A8080",
	"é ü", "\x1b[31mred", "<script>x</script>", "*", "it's", "bad\xffutf8", `back\slash`, "trail/"}

// TestKeyFormatRoundTrips: every part, in either place, prints as one
// word of printable text and reads back as itself.
func TestKeyFormatRoundTrips(t *testing.T) {
	for _, a := range append(awkward, "did:key:z6Mk") {
		for _, b := range awkward {
			k := formatKey(a, b)
			require.False(t, strings.ContainsFunc(k, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), k)
			first, second, err := parseKey(k, "KEY")
			require.NoError(t, err, k)
			require.Equal(t, [2]string{a, b}, [2]string{first, second}, k)
		}
	}
	require.Equal(t, "did:key:z6Mk/op-1", formatKey("did:key:z6Mk", "op-1"), "a usual key prints as it is")
	require.Equal(t, "did:key:z6Mk/a/b", formatKey("did:key:z6Mk", "a/b"))
}

// firstColumn is the first word of every line of a table below its header.
func firstColumn(table string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, "next page") {
			out = append(out, f[0])
		}
	}
	return out
}

// TestEveryPrintedKeyIsAccepted: the keys "ops list", "accounts list" and
// "sync list" print, taken as printed (the first word of a row), are
// accepted by every command that takes that key: ops show, -after,
// requeue and cancel; accounts set, pause, resume and -after; sync
// set-status -owner and sync list -after.
func TestEveryPrintedKeyIsAccepted(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		c := t.Context()
		want := map[string]repository.OperationKey{}
		for i, id := range awkward {
			caller := []string{"did:key:caller", "did:web:h/x y", `"c"`}[i%3]
			in := repository.OperationInput{CallerDID: caller, OperationID: id, NodeKey: "n", OwnerDID: "did:key:owner",
				ConnectorName: "crm", Model: "contact", Op: "create", AccountKey: id, Target: "t",
				DeterministicEventID: "e" + id, PayloadHash: "h", ReissueIntent: models.JSON(`{}`)}
			if utf8.ValidString(id) { // stored text is UTF-8: the invalid one is refused, as it should be
				_, _, err := d.repo.RecordOperation(c, in)
				require.NoError(t, err, "%q", id)
				want[formatKey(caller, id)] = repository.OperationKey{CallerDID: caller, OperationID: id}
			}
		}
		keys := firstColumn(ok(t, d.dsn, "ops", "list", "-state", "attempted", "-limit", "100"))
		require.ElementsMatch(t, keysOf(want), keys, "ops list prints each key once, one word")

		for _, k := range keys {
			var v showView
			require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "-json", "ops", "show", k)), &v), k)
			require.Equal(t, want[k], repository.OperationKey{CallerDID: v.Caller, OperationID: v.Operation}, k)
			require.Equal(t, k, v.Key, "JSON carries the printed key")
			var page []opView
			require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "-json", "ops", "list", "-state", "attempted", "-limit", "100", "-after", k)), &page))
			for _, o := range page {
				require.NotEqual(t, k, o.Key, "-after %s resumes after it", k)
			}
			require.Contains(t, ok(t, d.dsn, "ops", "cancel", "-force", k), "cancelled")
			require.Contains(t, ok(t, d.dsn, "ops", "requeue", k), "requeued")
		}

		for _, id := range awkward {
			if utf8.ValidString(id) {
				require.NoError(t, d.repo.SetAccountLimits(c, repository.AccountKey{ConnectorName: "crm", AccountKey: id},
					repository.AccountLimits{MaxInFlight: 3}))
			}
		}
		accounts := firstColumn(ok(t, d.dsn, "accounts", "list", "-limit", "1000"))
		require.Len(t, accounts, len(want))
		for _, k := range accounts {
			ok(t, d.dsn, "accounts", "set", k, "-max-in-flight", "4")
			ok(t, d.dsn, "accounts", "pause", k, "-for", "1m")
			ok(t, d.dsn, "accounts", "resume", k)
			ok(t, d.dsn, "accounts", "list", "-after", k)
		}
		listed, err := d.repo.ListAccounts(c, repository.ListAccountsParams{ConnectorName: "crm", Limit: 1000})
		require.NoError(t, err)
		for _, a := range listed {
			require.Equal(t, int64(4), a.Limits.MaxInFlight, "%q was set through its printed key", a.AccountKey.AccountKey)
		}

		for _, owner := range []string{"did:key:o1", "did:web:h%3A8080 x", "tab\towner"} {
			require.NoError(t, d.repo.SetSyncState(c, repository.ConnectorKey{OwnerDID: owner, ConnectorName: "crm"},
				repository.SyncStateInput{LastSyncedAt: time.Now().UTC().Format(time.RFC3339), Status: models.SyncStatusIdle}))
		}
		table := ok(t, d.dsn, "sync", "list", "-connector", "crm")
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			owner := strings.Fields(line)[1]
			require.Contains(t, ok(t, d.dsn, "sync", "set-status", "-connector", "crm", "-owner", owner, "-status", "syncing"), "syncing")
			ok(t, d.dsn, "sync", "list", "-connector", "crm", "-after", owner)
		}
	})
}

func keysOf(m map[string]repository.OperationKey) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
