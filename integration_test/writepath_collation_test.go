package integrationtest

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// icuDatabase creates a database whose default collation is ICU en-US (a
// server locale that does not order by bytes) and returns its DSN.
func icuDatabase(t *testing.T) string {
	t.Helper()
	return dbtest.NewDatabase(t, os.Getenv(pgEnv), dbtest.SchemaDSN(t, ""), "icu_",
		"TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")
}

// TestJournalByteOrderUnderICULocale: on a server whose locale is ICU
// en-US (which does not order by bytes), the journal's keyset pages list
// keys in strings.Compare order (the owner listing, ordered by created_at
// and then record order, lists them as recorded), for a plain journal and for one laid out
// with PartitionedLayout. (A journal partitioned before migration 0016 keeps
// its partition key, caller_did, in the server's order: a partition key's
// collation cannot change. RELIABILITY.md says so.)
func TestJournalByteOrderUnderICULocale(t *testing.T) {
	t.Parallel()
	for _, leg := range []dbtest.Leg{dbtest.PG, dbtest.PGPartitioned} {
		t.Run(leg.Name, func(t *testing.T) {
			t.Parallel()
			e := setupAt(t, leg, icuDatabase(t))
			repo := e.repo
			callers := []string{"b", "B", "a", "é", "e", "Z", "_", "ä"}
			for _, c := range callers {
				in := opInput(c, "op")
				in.OwnerDID = "bytes"
				_, _, err := repo.RecordOperation(ctx(t), in)
				require.NoError(t, err)
			}
			want := slices.Clone(callers)
			slices.SortFunc(want, strings.Compare)
			work, err := repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners, PageSize: 3})
			require.NoError(t, err)
			var got []string
			for _, op := range work.Operations {
				got = append(got, op.CallerDID)
			}
			require.Equal(t, want, got, "the due sweep's keyset pages")
			page, err := repo.ListOperationsByOwner(ctx(t), repository.ListOperationsParams{OwnerDID: "bytes", Limit: 100})
			require.NoError(t, err)
			got = got[:0]
			for _, op := range page {
				got = append(got, op.CallerDID)
			}
			require.Equal(t, callers, got, "the owner listing: record order for one created_at")
		})
	}
}
