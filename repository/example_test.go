package repository_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Example shows the three setup lines and a compare-and-swap progress update.
func Example() {
	dir, _ := os.MkdirTemp("", "connstore-example")
	defer os.RemoveAll(dir)
	db, err := gorm.Open(sqlite.Open("file:"+filepath.Join(dir, "app.db")+"?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate"),
		&gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	_ = db.Use(hooks.New(hooks.Config{}))
	_ = migrations.Migrate(ctx, db)
	repo, _ := repository.New(db, repository.Options{})

	type cursor struct{ Page int }
	for range 3 {
		err := repo.UpdateSyncProgress(ctx, repository.UpdateSyncProgressParams{
			ConnectorName: "crm", OwnerDID: "did:example:alice",
			Recompute: func(_ context.Context, cur *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				var c cursor
				if cur != nil { // nil on the first write: there is no row yet
					if err := cur.Checkpoint.Decode(&c); err != nil {
						return repository.SyncProgressResult{}, err
					}
				}
				c.Page++
				doc, err := models.NewJSON(c)
				return repository.SyncProgressResult{Checkpoint: doc, LastSyncedAt: "2026-12-02T00:00:00Z",
					EntityCount: int64(c.Page * 100)}, err
			},
		})
		if err != nil {
			panic(err)
		}
	}
	st, _ := repo.GetSyncState(ctx, "crm", "did:example:alice")
	fmt.Println(st.Checkpoint, st.EntityCount, st.Version, st.Status)
	// Output: {"Page":3} 300 2 idle
}
