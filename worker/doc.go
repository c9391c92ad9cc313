// Package worker re-drives the operations journal: a pool that claims due
// operations in batches, runs a handler per operation with bounded
// concurrency, heartbeats the leases of handlers still running, and records
// each handler's result through the repository's batched fenced writes.
// It is what a connector would otherwise write by hand around the journal.
//
//	pool, err := worker.New(repo, worker.Config{Handler: send, Concurrency: 8})
//	err = pool.Run(ctx) // until ctx is cancelled
//
// On cancellation the pool claims nothing more, lets running handlers finish
// within ShutdownGrace (then cancels their contexts), records what they
// returned, releases the leases of operations it did not finish, and returns
// once every goroutine it started has ended.
package worker
