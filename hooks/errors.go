package hooks

import "errors"

// ErrConflict is returned when a guarded update matched no row: a concurrent
// writer bumped the version, or the row was deleted or recreated. A Save
// carrying a read lock whose row is gone is ErrConflict too, never an insert.
var ErrConflict = errors.New("connstore: optimistic lock conflict")

// ErrMissingLock is returned when a guarded update has no lock to compare:
// the model was not read from the database, or the row has no incarnation.
var ErrMissingLock = errors.New("connstore: optimistic lock fields missing")

// ErrUnguardedWrite is returned, wrapped with the table and the reason, for
// a write on a locked model or table that the plugin cannot guard row by
// row: an UpdateAll upsert of rows carrying a read lock, a multi-row update
// whose rows lack a primary key, a write that names a locked table through a
// struct without the lock. Nothing is written.
var ErrUnguardedWrite = errors.New("connstore: write on a locked model cannot be guarded")
