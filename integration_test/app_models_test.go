package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// account is an application's own model guarded by the lock.
type account struct {
	ID      int64 `gorm:"primaryKey"`
	Owner   string
	Balance int64
	models.Lock
}

func (account) TableName() string { return "app_account" }

// plainAccount is an application model without a lock: the plugin must
// leave its SQL exactly as plain gorm writes it.
type plainAccount struct {
	ID      int64 `gorm:"primaryKey"`
	Owner   string
	Balance int64
	Version int64
}

func (plainAccount) TableName() string { return "app_plain" }

// ledger keeps its own version column (a document revision) and the lock
// under another name.
type ledger struct {
	ID      int64 `gorm:"primaryKey"`
	Version int64 // the app's, not the lock's
	Note    string
	Lock    models.VersionLock `gorm:"embedded;embeddedPrefix:row_"`
}

func (ledger) TableName() string { return "app_ledger" }

// unmapped holds a lock in a named field gorm does not map.
type unmapped struct {
	ID   int64 `gorm:"primaryKey"`
	Note string
	Lock models.VersionLock `gorm:"-"`
}

func (unmapped) TableName() string { return "app_unmapped" }

func migrateAppModels(t *testing.T, db *gorm.DB) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&account{}, &plainAccount{}, &ledger{}, &unmapped{}))
}

func loadAccount(t *testing.T, db *gorm.DB, id int64) *account {
	t.Helper()
	var a account
	require.NoError(t, db.Take(&a, id).Error)
	return &a
}
