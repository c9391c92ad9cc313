package main

import (
	"encoding/json"
	"github.com/stretchr/testify/require"
	"testing"
)

// Was: operation ids are free text and may hold a slash; the table
// prints CALLER/OPERATION, but -after splits at the LAST slash, so the
// operator cannot resume after such a row (exit 1, "not found").
func TestCLIAfterOperationIDWithSlash(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		for _, id := range []string{"a/1", "b"} {
			record(t, d.repo, id)
		}
		var page2 []opView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "ops", "list", "-json", "-state", "attempted",
			"-limit", "1", "-after", "did:key:caller/a/1")), &page2))
		require.Len(t, page2, 1)
		require.Equal(t, "b", page2[0].Operation)
	})
}
