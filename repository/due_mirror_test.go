package repository

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/due"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// TestScheduledMirrorsTheSQLPredicate: the in-memory branch rule of the due
// sweep (due.Scheduled) sorts every kind of watch row exactly as the SQL
// predicate it mirrors (scopes.WatchScheduled) selects it: every status,
// with no schedule, a schedule in the past, now and in the future.
func TestScheduledMirrorsTheSQLPredicate(t *testing.T) {
	db, err := sqliteconn.Open(filepath.Join(t.TempDir(), "due.db"), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	require.NoError(t, err)
	require.NoError(t, db.Use(hooks.New(hooks.Config{})))
	require.NoError(t, migrations.Migrate(t.Context(), db))
	now := time.UnixMilli(1_000_000)
	at := func(ms int64) *int64 { return &ms }
	var rows []models.ProjectionWatch
	for _, status := range []string{models.WatchPendingVerification, models.WatchVerified, models.WatchRepairFailed} {
		for i, next := range []*int64{nil, at(999_999), at(1_000_000), at(1_000_001)} {
			rows = append(rows, models.ProjectionWatch{OwnerDID: "o", ConnectorName: "crm", Model: "m", AccountKey: "a",
				SourceID: status + "-" + string(rune('0'+i)), DocumentID: "d", VerificationStatus: status, NextAttemptAt: next})
		}
	}
	require.NoError(t, db.Create(&rows).Error)
	var inSQL []string
	require.NoError(t, db.Model(&models.ProjectionWatch{}).Scopes(scopes.WatchScheduled(now)).Order("source_id").
		Pluck("source_id", &inSQL).Error)
	var inGo []string
	for i := range rows {
		if due.Scheduled(&rows[i], now.UnixMilli()) {
			inGo = append(inGo, rows[i].SourceID)
		}
	}
	slices.Sort(inGo)
	require.Equal(t, inSQL, inGo)
	require.Len(t, inGo, 4, "pending and repair_failed rows scheduled at or before now")
}
