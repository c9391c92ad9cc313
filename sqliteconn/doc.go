// Package sqliteconn opens SQLite the way connstore's concurrency rules
// need it, in one call:
//
//	db, err := sqliteconn.Open("app.db", sqliteconn.Options{})
//
// SQLite lets one connection write at a time. A pool of connections that
// race for that lock inside SQLite fails with "database is locked" whenever
// the loser's busy timeout runs out, waits in no particular order, and
// cannot be interrupted by a context. A handle from Open has one write
// slot in front of SQLite instead: every transaction and every writing
// statement queues for it in arrival order (FIFO), the wait ends with the
// caller's context (context.DeadlineExceeded at its deadline), and reads
// run on their own connections beside the writer (WAL mode). SQLite's own
// busy handling is kept only for other processes: a write outside a
// transaction runs inside BEGIN IMMEDIATE … COMMIT, and BEGIN is retried,
// with the context, while another process holds the lock. Foreign keys are
// on. gorm's PrepareStmt works: prepared statements pass through the slot.
//
// repository.New accepts a handle from Open, and refuses another pooled
// SQLite handle that lacks WAL, a busy timeout or immediate write
// transactions (unless it has a single connection).
package sqliteconn
