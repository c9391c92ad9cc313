package main

import (
	"encoding/json"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"strconv"
	"testing"
	"time"
)

// The overdue listing pages by due time. A row claimed between pages has
// a new due time (its lease's expiry), so the cursor carries the due time
// the page showed (-after-due, due_at in JSON): resolved through the row
// now, the next page started after the future time and skipped every
// remaining overdue row.
func TestCLIOverduePagesAcrossAClaim(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		for _, id := range []string{"op-1", "op-2", "op-3"} {
			record(t, d.repo, id)
			time.Sleep(5 * time.Millisecond) // distinct due times: op-1 first
		}
		time.Sleep(20 * time.Millisecond)
		var page1 []opView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "ops", "list", "-json", "-overdue",
			"-overdue-after", "1ms", "-limit", "1")), &page1))
		require.Len(t, page1, 1)
		require.Equal(t, "op-1", page1[0].Operation)

		// A pool claims the row the operator's page ended on.
		claimed, err := d.repo.ClaimOperations(t.Context(), repository.ClaimParams{Limit: 1, LeaseFor: time.Hour})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, "op-1", claimed[0].OperationID)

		// Without the due time the page showed, the cursor cannot be
		// placed: refused, not guessed from the row's new due time.
		fails(t, 2, "needs -after-due", nil, "-dsn", d.dsn, "ops", "list", "-overdue", "-overdue-after", "1ms",
			"-limit", "1", "-after", "did:key:caller/op-1")
		var page2 []opView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "ops", "list", "-json", "-overdue",
			"-overdue-after", "1ms", "-limit", "1", "-after", "did:key:caller/op-1",
			"-after-due", strconv.FormatInt(page1[0].DueAt, 10))), &page2))
		require.Len(t, page2, 1, "op-2 and op-3 are still overdue; the next page must not skip them")
		require.Equal(t, "op-2", page2[0].Operation)
	})
}
