package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAccounts: limits set, listed (as a table and as JSON), an account
// paused and resumed, each by the key "accounts list" prints; bad limits
// and a resume of an account not paused fail with exit 1, a malformed key
// with a usage error.
func TestAccounts(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		require.Contains(t, ok(t, d.dsn, "accounts", "set", "crm/acme", "-max-in-flight", "4", "-rate", "20", "-period", "1s", "-burst", "5"),
			"limits of crm/acme set")
		require.Contains(t, ok(t, d.dsn, "accounts", "set", "crm/*", "-fair"), "limits of crm/* set")
		require.Regexp(t, `crm/acme\s+4\s+-\s+20/1s burst 5\s+0\s+-`, ok(t, d.dsn, "accounts", "list"))

		var rows []accountView
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "accounts", "list", "-json")), &rows))
		require.Len(t, rows, 2)
		require.Equal(t, "crm/*", rows[0].Account)
		require.True(t, rows[0].Fair)
		key := rows[1].Account
		require.Equal(t, accountView{Account: "crm/acme", MaxInFlight: 4, Rate: 20, PeriodSecs: 1, Burst: 5, NextEligible: rows[1].NextEligible}, rows[1])

		require.Contains(t, ok(t, d.dsn, "accounts", "pause", key, "-for", "10m"), "crm/acme paused until")
		require.NoError(t, json.Unmarshal([]byte(ok(t, d.dsn, "accounts", "list", "-paused", "-json")), &rows))
		require.Len(t, rows, 1)
		require.NotNil(t, rows[0].PausedUntil)
		require.Contains(t, ok(t, d.dsn, "accounts", "resume", key), "crm/acme resumed")
		require.Equal(t, "[]\n", ok(t, d.dsn, "accounts", "list", "-paused", "-json"))

		fails(t, 1, "Burst 9 exceeds Rate 2", nil, "-dsn", d.dsn, "accounts", "set", key, "-rate", "2", "-period", "1s", "-burst", "9")
		fails(t, 1, "not paused", nil, "-dsn", d.dsn, "accounts", "resume", key)
		fails(t, 2, "CONNECTOR/ACCOUNT", nil, "-dsn", d.dsn, "accounts", "pause", "nokey", "-for", "1m")
		fails(t, 2, "needs -for", nil, "-dsn", d.dsn, "accounts", "pause", key)
	})
}
