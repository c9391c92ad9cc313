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
// user's build or module graph: neither its go.mod, nor its module graph
// (go mod graph: connstore routes reads to the primary without importing
// gorm.io/plugin/dbresolver, whose module requires the MySQL driver), nor
// the packages it and its tests build name one.
func TestNoOtherDatabaseDrivers(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	require.NotRegexp(t, otherDrivers, string(mod))
	for _, args := range [][]string{{"mod", "graph"}, {"list", "-deps", "-test", "./..."}} {
		out, err := exec.Command("go", args...).CombinedOutput()
		require.NoError(t, err, string(out))
		require.NotRegexp(t, otherDrivers, string(out), "go %v", args)
		require.Contains(t, string(out), "github.com/jackc/pgx/v5", "the list is the real dependency list")
	}
}
