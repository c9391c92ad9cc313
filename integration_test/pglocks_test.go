package integrationtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// lockHolder opens a transaction that will hold row locks for a test, and
// returns it with its backend pid; it is rolled back when the test ends.
func lockHolder(t *testing.T, db *gorm.DB) (*gorm.DB, int) {
	t.Helper()
	tx := db.Begin()
	require.NoError(t, tx.Error)
	t.Cleanup(func() { tx.Rollback() })
	var pid int
	require.NoError(t, tx.Raw("SELECT pg_backend_pid()").Scan(&pid).Error)
	return tx, pid
}

// waitBlockedBy waits until some backend waits on a lock held by holder and
// returns that backend's pid.
func waitBlockedBy(t *testing.T, db *gorm.DB, holder int) int {
	t.Helper()
	var victim int
	require.Eventually(t, func() bool {
		victim = 0
		err := db.Raw(`SELECT pid FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))`, holder).
			Scan(&victim).Error
		return err == nil && victim != 0
	}, 20*time.Second, 10*time.Millisecond, "no backend ever waited on pid %d", holder)
	return victim
}
