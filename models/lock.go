package models

// Lock is the optimistic-lock pair a model embeds when its writes are
// guarded on version and incarnation. The incarnation is a random id set on
// insert, so a writer that read a row before it was deleted and recreated
// cannot rebase stale state onto the new row (ABA).
type Lock struct {
	// Version is bumped by every guarded write; it starts at 0.
	Version int64 `gorm:"column:version;type:bigint;not null;default:0"`
	// Incarnation is the random id the row was inserted with.
	Incarnation *string `gorm:"column:incarnation"`
}

// LockState reports the lock fields as read.
func (l *Lock) LockState() LockState {
	state := LockState{Version: l.Version, HasIncarnation: true}
	if l.Incarnation != nil {
		state.Incarnation = *l.Incarnation
	}
	return state
}

// VersionLock is the version-only guard for tables without an incarnation.
type VersionLock struct {
	// Version is bumped by every guarded write; it starts at 0.
	Version int64 `gorm:"column:version;type:bigint;not null;default:0"`
}

// LockState reports the lock fields as read.
func (l *VersionLock) LockState() LockState { return LockState{Version: l.Version} }

// LockState is a snapshot of a model's lock fields.
type LockState struct {
	// Version is the version the row was read at.
	Version int64
	// Incarnation is the incarnation read, or "" when none was stored.
	Incarnation string
	// HasIncarnation is true when the model carries an incarnation column.
	HasIncarnation bool
}

// StrPtr returns a pointer to s; a helper for nullable text columns.
func StrPtr(s string) *string { return &s }
