package hooks

import "errors"

// ErrConflict is returned when a guarded update matched no row: a concurrent
// writer bumped the version, or the row was deleted or recreated.
var ErrConflict = errors.New("connstore: optimistic lock conflict")

// ErrMissingLock is returned when a guarded update has no lock to compare:
// the model was not read from the database, or the row has no incarnation.
var ErrMissingLock = errors.New("connstore: optimistic lock fields missing")
