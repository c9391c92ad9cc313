package hooks_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
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
	// A handle with the lock plugin installed (connstoretest's store; an
	// application calls db.Use(hooks.New(hooks.Config{})) on its own).
	store, err := connstoretest.OpenSQLite(filepath.Join(dir, "app.db"), connstoretest.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	db := store.DB
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
