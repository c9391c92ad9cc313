package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestBulkCommands: a dry run prints the count and changes nothing; a
// limited call says more match; -all finishes; a bulk cancel leaves a
// live lease to its holder and says so; bad flags are usage errors.
func TestBulkCommands(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		c := t.Context()
		for i := range 6 {
			record(t, d.repo, fmt.Sprintf("op-%d", i))
		}
		claimed, err := d.repo.ClaimOperations(c, repository.ClaimParams{Limit: 5, LeaseFor: time.Hour})
		require.NoError(t, err)
		for i := range 5 {
			_, err := d.repo.MarkOperationDead(c, repository.FenceOf(&claimed[i]))
			require.NoError(t, err)
		}
		require.Contains(t, ok(t, d.dsn, "ops", "requeue-matching", "-dry-run", "-connector", "crm"), "dry run: would requeue 5 of 5 matched")
		counts, err := d.repo.CountOperations(c, repository.OperationCountsParams{States: []string{models.OperationDead}})
		require.NoError(t, err)
		require.Equal(t, int64(5), counts[0].Count, "a dry run changes nothing")

		require.Contains(t, ok(t, d.dsn, "ops", "requeue-matching", "-limit", "2", "-account", "acct"), "requeue 2 of 2 matched; more may match: pass -all")
		var total bulkTotal
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "-json", "ops", "requeue-matching", "-limit", "2", "-all", "-reset-attempts")), &total))
		require.Equal(t, bulkTotal{Matched: 3, Changed: 3, Calls: 2}, total)
		require.Contains(t, ok(t, d.dsn, "ops", "requeue-matching"), "requeue 0 of 0 matched")

		live, err := d.repo.ClaimOperations(c, repository.ClaimParams{Limit: 1, LeaseFor: time.Hour})
		require.NoError(t, err)
		require.Len(t, live, 1)
		require.Contains(t, ok(t, d.dsn, "ops", "cancel-matching", "-owner", "did:key:owner"), "cancel 5 of 6 matched; 1 under a live lease left to their holders")
		op, err := d.repo.GetOperation(c, repository.OperationKey{CallerDID: live[0].CallerDID, OperationID: live[0].OperationID})
		require.NoError(t, err)
		require.Equal(t, models.OperationAttempted, op.State, "the holder keeps it")

		fails(t, 2, "-before", nil, "-dsn", d.dsn, "ops", "requeue-matching", "-before", "yesterday")
		fails(t, 2, "-limit 5000 is not 1 to 1000", nil, "-dsn", d.dsn, "ops", "cancel-matching", "-limit", "5000")
		fails(t, 1, "invalid input", nil, "-dsn", d.dsn, "ops", "cancel-matching", "-state", "dead")
	})
}
