package hooks_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/sqliteconn"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Account is an application's own model guarded by the lock.
type Account struct {
	ID      int64 `gorm:"primaryKey"`
	Balance int64
	models.Lock
}

// Example guards an application model: a writer that read the row before
// another writer changed it loses with ErrConflict instead of overwriting.
func Example() {
	dir, _ := os.MkdirTemp("", "connstore-hooks")
	defer os.RemoveAll(dir)
	db, err := sqliteconn.Open(filepath.Join(dir, "app.db"), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	if err != nil {
		panic(err)
	}
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		panic(err)
	}
	if err := db.AutoMigrate(&Account{}); err != nil {
		panic(err)
	}
	if err := db.Create(&Account{ID: 1, Balance: 10}).Error; err != nil {
		panic(err)
	}

	var mine, theirs Account
	db.First(&mine, 1)
	db.First(&theirs, 1)
	if err := db.Model(&theirs).Update("balance", 20).Error; err != nil {
		panic(err)
	}
	err = db.Model(&mine).Update("balance", 15).Error
	fmt.Println(errors.Is(err, hooks.ErrConflict), theirs.Version)

	db.First(&mine, 1) // re-read, then write again
	fmt.Println(db.Model(&mine).Update("balance", 15).Error, mine.Version)
	// Output:
	// true 1
	// <nil> 2
}
