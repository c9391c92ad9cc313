package integrationtest

import (
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// TestHookWritePatterns drives every gorm write pattern through the plugin
// on an app model with the lock. Each case starts from account 1 stored at
// version 0 with balance 1, owner "a".
func TestHookWritePatterns(t *testing.T) {
	t.Parallel()
	type want struct {
		err     error
		version int64 // stored version of account 1 afterwards (-1: deleted)
		balance int64
		memoryV int64 // the model's version after the call (-1: not checked)
	}
	cases := []struct {
		name string
		run  func(db *gorm.DB, a *account) error
		want want
	}{
		{"save current", func(db *gorm.DB, a *account) error { a.Balance = 2; return db.Save(a).Error },
			want{version: 1, balance: 2, memoryV: 1}},
		{"save stale", func(db *gorm.DB, a *account) error {
			require.NoError(t, db.Model(loadAccount(t, db, 1)).Update("balance", 5).Error)
			a.Balance = 2
			return db.Save(a).Error
		}, want{err: hooks.ErrConflict, version: 1, balance: 5, memoryV: 0}},
		{"updates struct", func(db *gorm.DB, a *account) error { return db.Model(a).Updates(account{Balance: 3}).Error },
			want{version: 1, balance: 3, memoryV: 1}},
		{"updates struct naming the lock", func(db *gorm.DB, a *account) error {
			return db.Model(a).Updates(account{Balance: 3, Lock: models.Lock{Version: 7, Incarnation: models.StrPtr("forged")}}).Error
		}, want{version: 1, balance: 3, memoryV: 1}},
		{"updates map", func(db *gorm.DB, a *account) error {
			return db.Model(a).Updates(map[string]any{"balance": 4, "version": 9}).Error
		}, want{version: 1, balance: 4, memoryV: 1}},
		{"select star struct", func(db *gorm.DB, a *account) error {
			return db.Model(a).Select("*").Updates(account{Balance: 4}).Error
		}, want{version: 1, balance: 4, memoryV: 1}},
		{"select list", func(db *gorm.DB, a *account) error {
			return db.Model(a).Select("balance").Updates(account{Balance: 5, Owner: "x"}).Error
		}, want{version: 1, balance: 5, memoryV: 1}},
		{"omit", func(db *gorm.DB, a *account) error {
			return db.Model(a).Omit("owner").Updates(account{Balance: 6, Owner: "x"}).Error
		}, want{version: 1, balance: 6, memoryV: 1}},
		{"update", func(db *gorm.DB, a *account) error { return db.Model(a).Update("balance", 7).Error },
			want{version: 1, balance: 7, memoryV: 1}},
		{"update column", func(db *gorm.DB, a *account) error { return db.Model(a).UpdateColumn("balance", 8).Error },
			want{version: 1, balance: 8, memoryV: 1}},
		{"update columns", func(db *gorm.DB, a *account) error {
			return db.Model(a).UpdateColumns(account{Balance: 9}).Error
		}, want{version: 1, balance: 9, memoryV: 1}},
		{"stale update", func(db *gorm.DB, a *account) error {
			require.NoError(t, db.Model(loadAccount(t, db, 1)).Update("balance", 5).Error)
			return db.Model(a).Update("balance", 6).Error
		}, want{err: hooks.ErrConflict, version: 1, balance: 5, memoryV: 0}},
		{"set-based map", func(db *gorm.DB, _ *account) error {
			return db.Model(&account{}).Where("owner = ?", "a").Updates(map[string]any{"balance": 10}).Error
		}, want{version: 1, balance: 10, memoryV: -1}},
		{"set-based struct", func(db *gorm.DB, _ *account) error {
			return db.Model(&account{}).Where("owner = ?", "a").Updates(account{Balance: 11}).Error
		}, want{version: 1, balance: 11, memoryV: -1}},
		{"upsert update all", func(db *gorm.DB, _ *account) error {
			return db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&account{ID: 1, Owner: "a", Balance: 12}).Error
		}, want{version: 1, balance: 12, memoryV: -1}},
		{"upsert assignment columns with lock", func(db *gorm.DB, _ *account) error {
			return db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}},
				DoUpdates: clause.AssignmentColumns([]string{"balance", "version", "incarnation"})}).
				Create(&account{ID: 1, Owner: "a", Balance: 13}).Error
		}, want{version: 1, balance: 13, memoryV: -1}},
		{"upsert assignment columns without lock", func(db *gorm.DB, _ *account) error {
			return db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}},
				DoUpdates: clause.AssignmentColumns([]string{"balance"})}).
				Create(&account{ID: 1, Owner: "a", Balance: 13}).Error
		}, want{version: 1, balance: 13, memoryV: -1}},
		{"upsert do nothing", func(db *gorm.DB, _ *account) error {
			return db.Clauses(clause.OnConflict{DoNothing: true}).Create(&account{ID: 1, Balance: 14}).Error
		}, want{version: 0, balance: 1, memoryV: -1}},
		{"first or create existing with assign", func(db *gorm.DB, _ *account) error {
			var got account
			return db.Where(account{ID: 1}).Assign(account{Balance: 15}).FirstOrCreate(&got).Error
		}, want{version: 1, balance: 15, memoryV: -1}},
		{"delete", func(db *gorm.DB, a *account) error { return db.Delete(a).Error },
			want{version: -1, memoryV: -1}},
	}
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		for _, tc := range cases {
			require.NoError(t, e.db.Exec("DELETE FROM app_account").Error)
			require.NoError(t, e.db.Create(&account{ID: 1, Owner: "a", Balance: 1}).Error)
			a := loadAccount(t, e.db, 1)
			inc := *a.Incarnation
			err := tc.run(e.db, a)
			if tc.want.err != nil {
				require.ErrorIs(t, err, tc.want.err, tc.name)
			} else {
				require.NoError(t, err, tc.name)
			}
			if tc.want.version < 0 {
				require.Zero(t, count(t, e.db, &account{}, "id = 1"), tc.name)
				continue
			}
			got := loadAccount(t, e.db, 1)
			require.Equal(t, tc.want.version, got.Version, tc.name)
			require.Equal(t, tc.want.balance, got.Balance, tc.name)
			require.Equal(t, inc, *got.Incarnation, "%s: the stored incarnation stays", tc.name)
			if tc.want.memoryV >= 0 {
				require.Equal(t, tc.want.memoryV, a.Version, "%s: in-memory version", tc.name)
			}
		}
	})
}

// TestHookInsertPatterns: every insert path seeds version 0 and a fresh
// incarnation, including Save's fallback for a row that does not exist.
func TestHookInsertPatterns(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.Create(&account{ID: 1, Owner: "a", Lock: models.Lock{Version: 5}}).Error)
		require.NoError(t, e.db.CreateInBatches([]account{{ID: 2}, {ID: 3}, {ID: 4}}, 2).Error)
		require.NoError(t, e.db.Save(&account{ID: 999, Balance: 3}).Error, "Save of an absent row inserts it")
		var fresh account
		require.NoError(t, e.db.Where(account{ID: 5}).FirstOrCreate(&fresh).Error)
		seen := map[string]bool{}
		for _, id := range []int64{1, 2, 3, 4, 999, 5} {
			got := loadAccount(t, e.db, id)
			require.Equal(t, int64(0), got.Version, "row %d", id)
			require.NotNil(t, got.Incarnation, "row %d", id)
			require.False(t, seen[*got.Incarnation], "row %d: incarnations are unique", id)
			seen[*got.Incarnation] = true
		}
		require.Equal(t, int64(3), loadAccount(t, e.db, 999).Balance)

		// Save of an unread row that does exist is stale, not an insert.
		err := e.db.Save(&account{ID: 1, Balance: 8}).Error
		require.ErrorIs(t, err, hooks.ErrConflict)
		require.Equal(t, int64(0), loadAccount(t, e.db, 1).Balance)
	})
}

// TestHookUpsertNeverRewindsVersion: a writer that read the row long ago
// must still lose after someone upserted over it.
func TestHookUpsertNeverRewindsVersion(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.Create(&account{ID: 1, Owner: "a"}).Error)
		stale := loadAccount(t, e.db, 1)
		for range 2 {
			require.NoError(t, e.db.Model(loadAccount(t, e.db, 1)).Update("balance", 1).Error)
		}
		require.NoError(t, e.db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&account{ID: 1, Owner: "b"}).Error)
		require.Equal(t, int64(3), loadAccount(t, e.db, 1).Version)
		require.ErrorIs(t, e.db.Model(stale).Update("balance", 99).Error, hooks.ErrConflict)
	})
}
