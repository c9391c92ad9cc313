package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/worker"
)

// Example re-drives recorded operations with a pool until they are done.
func Example() {
	dir, _ := os.MkdirTemp("", "connstore-worker")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	// A migrated store with the lock plugin (see the README for the same
	// set-up on an application's own handle).
	store, err := connstoretest.OpenSQLite(filepath.Join(dir, "app.db"), connstoretest.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	repo := store.Repo
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
