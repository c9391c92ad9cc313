// Package hooks provides the optimistic-locking guard as a gorm.Plugin.
//
// Register it once with db.Use(hooks.New(hooks.Config{})). Any model that
// embeds models.Lock (version + incarnation) or models.VersionLock (version
// only) is then guarded. The lock's columns are read from the model's
// schema, so an embeddedPrefix (gorm:"embedded;embeddedPrefix:row_") moves
// them next to an app column of the same name; a lock held in a field gorm
// does not map is refused with ErrMissingLock on every write rather than
// left unguarded. Models without a lock get exactly gorm's own SQL.
//
// Guarded patterns:
//
//   - Create, CreateInBatches, FirstOrCreate and Save of a new row write
//     version 0 and, for models.Lock, a fresh incarnation from the id source.
//   - An update of one loaded row (Save, Updates with a struct or map,
//     Select/Omit lists, Select("*"), Update, UpdateColumn(s), Assign with
//     FirstOrCreate) adds WHERE version = <read> [AND incarnation = <read>]
//     and writes version = <read> + 1; the model's version follows. Zero rows
//     is ErrConflict, never a silent success; a missing incarnation is
//     ErrMissingLock. Lock columns named in the struct or map are dropped.
//   - Save of a row that does not exist (no incarnation read, or none
//     stored) falls through to gorm's insert; Save of a stale row is
//     ErrConflict.
//   - A set-based update (no primary key on the model), with a map or a
//     struct, bumps version = version + 1 on every matched row.
//   - An upsert (ON CONFLICT DO UPDATE, UpdateAll or an assignment list)
//     never writes the inserted row's lock over a stored one: the lock
//     columns leave the SET list and the stored version is bumped by one.
//     DoNothing is untouched.
//
// Opt out visibly: SkipLock for a path that owns its own conflict rule (no
// check, no bump, no seeding), KeepLockOnConflict for an upsert whose update
// branch must leave the lock as stored. Delete is not guarded.
package hooks
