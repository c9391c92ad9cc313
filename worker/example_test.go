package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/migrations"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/connstore/connstore/worker"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Example re-drives recorded operations with a pool until they are done.
func Example() {
	dir, _ := os.MkdirTemp("", "connstore-worker")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqliteconn.Open(filepath.Join(dir, "app.db"), sqliteconn.Options{Config: &gorm.Config{Logger: logger.Discard}})
	if err != nil {
		panic(err)
	}
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		panic(err)
	}
	if err := migrations.Migrate(ctx, db); err != nil {
		panic(err)
	}
	repo, err := repository.New(db, repository.Options{})
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		_, _, err := repo.RecordOperation(ctx, repository.OperationInput{CallerDID: "did:example:alice", OperationID: id,
			NodeKey: "n", OwnerDID: "did:example:alice", ConnectorName: "crm", Model: "contact", Op: "create",
			AccountKey: "acct", Target: "contacts", DeterministicEventID: "evt-" + id, PayloadHash: "h-" + id,
			ReissueIntent: models.JSON(`{"name":"Ada"}`)})
		if err != nil {
			panic(err)
		}
	}

	pool, err := worker.New(repo, worker.Config{Concurrency: 8,
		Handler: func(ctx context.Context, op *models.Operation) worker.Result {
			documentID := "doc-" + op.OperationID // perform op's outbound write here
			return worker.Commit(&documentID, nil, nil)
		}})
	if err != nil {
		panic(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- pool.Run(run) }() // Run works until its context is cancelled
	for pool.Stats().Committed < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	fmt.Println(<-done, pool.Stats().Committed)
	// Output: <nil> 3
}
