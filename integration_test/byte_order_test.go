package integrationtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestJournalKeysOrderByBytes: the journal's identifier columns compare
// byte by byte on both databases (migration 0016 on PostgreSQL; SQLite's
// BINARY), so the due sweep's keyset pages list keys in Go's strings.Compare order
// whatever the server's locale, and PostgreSQL's catalog says so for every
// such column.
func TestJournalKeysOrderByBytes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		callers := []string{"b", "B", "a", "é", "e", "Z", "_", "ä"}
		for _, c := range callers {
			in := opInput(c, "op")
			in.OwnerDID = "bytes"
			_, _, err := e.repo.RecordOperation(ctx(t), in)
			require.NoError(t, err)
		}
		work, err := e.repo.ListDueOperations(ctx(t), repository.DueParams{Now: e.clock.Now(), ReadWinners: noWinners, PageSize: 3})
		require.NoError(t, err)
		got := make([]string, len(work.Operations))
		for i, op := range work.Operations {
			got[i] = op.CallerDID
		}
		want := slices.Clone(callers)
		slices.SortFunc(want, strings.Compare)
		require.Equal(t, want, got)

		if e.kind != pgKind {
			return
		}
		require.Equal(t, []string{"caller_did:C", "connector_name:C", "document_id:C", "operation_id:C", "owner_did:C", "state:C"},
			journalCollations(t, e.db))
	})
}

// journalCollations lists the journal's identifier columns with their
// collations (PostgreSQL), as "column:collation".
func journalCollations(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var collations []string
	require.NoError(t, db.Raw(`SELECT column_name || ':' || COALESCE(collation_name, 'default')
		FROM information_schema.columns WHERE table_schema = current_schema()
			AND table_name = 'kubun_connector_operation'
			AND column_name IN ('caller_did', 'operation_id', 'owner_did', 'connector_name', 'document_id', 'state')
		ORDER BY column_name`).Scan(&collations).Error)
	return collations
}
