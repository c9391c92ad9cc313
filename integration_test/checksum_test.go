package integrationtest

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// checksum digests every row of every connstore table, in key order, so a
// test can show a call changed nothing at all.
func checksum(t *testing.T, db *gorm.DB) string {
	t.Helper()
	h := sha256.New()
	for _, m := range models.All() {
		stmt := &gorm.Statement{DB: db}
		require.NoError(t, stmt.Parse(m))
		order := make([]string, len(stmt.Schema.PrimaryFieldDBNames))
		for i, c := range stmt.Schema.PrimaryFieldDBNames {
			order[i] = db.Statement.Quote(c)
		}
		var rows []map[string]any
		require.NoError(t, db.Table(stmt.Schema.Table).Order(strings.Join(order, ", ")).Find(&rows).Error)
		fmt.Fprintf(h, "%s:%v\n", stmt.Schema.Table, rows)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
