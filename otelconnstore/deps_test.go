package otelconnstore_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// otherDrivers matches database drivers other than the project's own
// (PostgreSQL through pgx, SQLite through mattn).
var otherDrivers = regexp.MustCompile(`(?i)clickhouse|mysql|sqlserver|mssql|oracle|go-ora|snowflake|duckdb`)

// TestNoOtherDatabaseDrivers: this module adds no database driver to a
// user's build. Neither its go.mod nor the packages it and its tests build
// name one. (gorm.io/plugin/dbresolver, which connstore itself requires,
// lists the MySQL driver for its own tests: go mod graph shows that edge,
// but no package of it is ever built.)
func TestNoOtherDatabaseDrivers(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	require.NotRegexp(t, otherDrivers, string(mod))
	out, err := exec.Command("go", "list", "-deps", "-test", "./...").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NotRegexp(t, otherDrivers, string(out))
	require.Contains(t, string(out), "github.com/jackc/pgx/v5", "the list is the real dependency list")
}
