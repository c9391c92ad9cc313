package integrationtest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// TestHookRenamedLockColumn: a lock embedded under a prefix is guarded by
// its real column, and the app's own version column is left alone.
func TestHookRenamedLockColumn(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.Create(&ledger{ID: 1, Version: 40, Note: "a"}).Error)
		var stale, cur ledger
		require.NoError(t, e.db.Take(&stale, 1).Error)
		require.NoError(t, e.db.Take(&cur, 1).Error)
		require.NoError(t, e.db.Model(&cur).Updates(map[string]any{"note": "b", "version": 41}).Error)
		require.Equal(t, int64(1), cur.Lock.Version)
		require.ErrorIs(t, e.db.Model(&stale).Update("note", "c").Error, hooks.ErrConflict)
		var got ledger
		require.NoError(t, e.db.Take(&got, 1).Error)
		require.Equal(t, ledger{ID: 1, Version: 41, Note: "b", Lock: got.Lock}, got, "the app's version is its own")
		require.Equal(t, int64(1), got.Lock.Version)
	})
}

// TestHookUnmappedLockRefused: a lock the schema does not map is refused on
// every write instead of being silently unguarded.
func TestHookUnmappedLockRefused(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		err := e.db.Create(&unmapped{ID: 1}).Error
		require.ErrorIs(t, err, hooks.ErrMissingLock)
		require.ErrorContains(t, err, "field Lock")
		require.NoError(t, hooks.SkipLock(e.db).Create(&unmapped{ID: 1}).Error)
		require.ErrorIs(t, e.db.Model(&unmapped{ID: 1}).Update("note", "x").Error, hooks.ErrMissingLock)
	})
}

// TestHookPlainModelSQLUnchanged: on a model without a lock the plugin adds
// nothing: every pattern's SQL equals plain gorm's.
func TestHookPlainModelSQLUnchanged(t *testing.T) {
	t.Parallel()
	patterns := map[string]func(*gorm.DB) *gorm.DB{
		"create":  func(db *gorm.DB) *gorm.DB { return db.Create(&plainAccount{ID: 1, Owner: "a"}) },
		"batch":   func(db *gorm.DB) *gorm.DB { return db.CreateInBatches([]plainAccount{{ID: 2}, {ID: 3}}, 5) },
		"save":    func(db *gorm.DB) *gorm.DB { return db.Save(&plainAccount{ID: 1, Balance: 2, Version: 3}) },
		"updates": func(db *gorm.DB) *gorm.DB { return db.Model(&plainAccount{ID: 1}).Updates(plainAccount{Balance: 3}) },
		"map": func(db *gorm.DB) *gorm.DB {
			return db.Model(&plainAccount{ID: 1}).Updates(map[string]any{"version": 4})
		},
		"select": func(db *gorm.DB) *gorm.DB { return db.Model(&plainAccount{ID: 1}).Select("*").Updates(plainAccount{}) },
		"column": func(db *gorm.DB) *gorm.DB { return db.Model(&plainAccount{ID: 1}).UpdateColumn("balance", 5) },
		"set-based": func(db *gorm.DB) *gorm.DB {
			return db.Model(&plainAccount{}).Where("owner = ?", "a").Update("balance", 6)
		},
		"upsert": func(db *gorm.DB) *gorm.DB {
			return db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&plainAccount{ID: 1})
		},
		"do nothing": func(db *gorm.DB) *gorm.DB {
			return db.Clauses(clause.OnConflict{DoNothing: true}).Create(&plainAccount{ID: 1})
		},
		"delete": func(db *gorm.DB) *gorm.DB { return db.Delete(&plainAccount{ID: 1}) },
	}
	forEachDB(t, func(t *testing.T, e *env) {
		bare := openBare(t, e.kind)
		for name, p := range patterns {
			require.Equal(t, bare.ToSQL(p), e.db.ToSQL(p), name)
		}
	})
}

// TestHookNeverPanics drives random combinations of Model, Dest, Select and
// Omit shapes through the plugin: any outcome but a panic is acceptable.
func TestHookNeverPanics(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		r := rand.New(rand.NewPCG(1, 2))
		models := []func() any{
			func() any { return loadAccountOrNew(e.db, 1) }, func() any { return &account{} },
			func() any { return &account{ID: 7} }, func() any { return nil },
		}
		dests := []func() any{
			func() any { return account{Balance: 4} }, func() any { return &account{Owner: "z"} },
			func() any { return map[string]any{"balance": 5, "version": 1} }, func() any { return plainAccount{Balance: 1} },
			func() any { return []account{{ID: 1}} }, func() any { return map[string]any{} },
		}
		selects := [][]string{nil, {"*"}, {"balance"}, {"version"}, {"id", "owner"}}
		omits := [][]string{nil, {"owner"}, {"version"}, {"incarnation"}}
		for i := range 400 {
			require.NoError(t, e.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&account{ID: 1}).Error)
			q := e.db.Session(&gorm.Session{})
			if m := models[r.IntN(len(models))](); m != nil {
				q = q.Model(m)
			} else {
				q = q.Table("app_account")
			}
			if s := selects[r.IntN(len(selects))]; s != nil {
				q = q.Select(s)
			}
			if o := omits[r.IntN(len(omits))]; o != nil {
				q = q.Omit(o...)
			}
			dest, op := dests[r.IntN(len(dests))](), r.IntN(4)
			if op == 3 && reflect.ValueOf(dest).Kind() == reflect.Struct {
				op = 0 // plain gorm itself panics saving an unaddressable struct
			}
			require.NotPanics(t, func() {
				switch op {
				case 0:
					_ = q.Updates(dest).Error
				case 1:
					_ = q.Where("id > 0").Updates(dest).Error
				case 2:
					_ = q.UpdateColumns(dest).Error
				default:
					_ = q.Save(dest).Error
				}
			}, fmt.Sprintf("case %d: op %d dest %T", i, op, dest))
		}
	})
}

func loadAccountOrNew(db *gorm.DB, id int64) *account {
	var a account
	if db.Take(&a, id).Error != nil {
		return &account{ID: id}
	}
	return &a
}
