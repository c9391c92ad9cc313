// Package sqliteconn opens SQLite the way connstore's concurrency rules
// need it, in one call:
//
//	db, err := sqliteconn.Open("app.db", sqliteconn.Options{})
//
// The file is in WAL mode (readers never block the writer), every write
// transaction takes the write lock when it begins (BEGIN IMMEDIATE, so two
// transactions never deadlock upgrading a read lock), foreign keys are on,
// and waiting for the write lock honours the caller's context: SQLite's own
// busy timeout is kept short and the wait is retried here, so a deadline
// returns promptly with context.DeadlineExceeded instead of after the busy
// timeout with "database is locked".
//
// repository.New refuses a SQLite handle that lacks WAL, a busy timeout or
// immediate write transactions (unless it has a single connection).
package sqliteconn
