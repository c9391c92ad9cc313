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
//   - A Save carrying a read lock (a version or an incarnation) is that
//     guarded update or ErrConflict, never an insert: a row deleted, or
//     deleted and recreated, since it was read stays as the other writer
//     left it. A Save of a row never read (zero lock) that matches nothing
//     inserts it with INSERT … ON CONFLICT DO NOTHING on the write's own
//     connection, and is ErrConflict, not an overwrite, when the row exists.
//     No separate read decides it, so a lagging replica behind
//     gorm.io/plugin/dbresolver cannot.
//   - A Save of a slice, and each child saved with FullSaveAssociations, is
//     one such Save per row in one transaction: any stale row is ErrConflict
//     and none of the rows is written.
//   - An update of a slice model, Model(&rows).Updates(...), guards each row
//     by its own key and lock (OR-ed conditions) and bumps each row's own
//     version; fewer rows matched than guarded is ErrConflict. A row of the
//     slice without its primary key is ErrUnguardedWrite.
//   - A set-based update (no primary key on the model, or an empty slice),
//     with a map or a struct, bumps version = version + 1 on every matched
//     row.
//   - An update naming a locked model's table with no model,
//     db.Table("app_account").Where(...).Updates(map), is a set-based
//     update: lock columns leave the map and the version is bumped. A create
//     by table name is seeded. The plugin knows a table from Config.Models,
//     and from the writes through its model it has seen. A lockless struct
//     writing into a locked table is ErrUnguardedWrite.
//   - An upsert (ON CONFLICT DO UPDATE, UpdateAll or an assignment list)
//     never writes the inserted row's lock over a stored one: the lock
//     columns leave the SET list and the stored version is bumped by one.
//     An UpdateAll upsert of rows carrying a read lock is ErrUnguardedWrite:
//     one INSERT can neither compare each row's lock nor refuse to re-insert
//     a deleted row. DoNothing is untouched.
//
// Every check that decides a write runs right after gorm's statement, before
// associations are saved and before gorm's default transaction commits, so
// a refused write leaves nothing behind; the in-memory version is settled
// once the whole statement's outcome is known.
//
// Opt out visibly: SkipLock for a path that owns its own conflict rule (no
// check, no bump, no seeding), KeepLockOnConflict for an upsert whose update
// branch must leave the lock as stored (it also admits an UpdateAll upsert of
// rows carrying a read lock, as a deliberate blind write).
//
// Known limits:
//
//   - Delete is not guarded, and raw SQL (Exec, Raw) is out of reach.
//   - models.VersionLock has no incarnation: a row read at version 0 cannot
//     be told from one never read, so its Save inserts the row when absent
//     (it may have been deleted since the read), and a never-read Save
//     updates a stored row still at version 0.
//   - A table is recognised by name only once the plugin knows it (register
//     it in Config.Models); a subquery or CTE as the table is not.
//   - An upsert with an assignment list (DoUpdates) is a set-based write:
//     it bumps the stored version but compares nothing.
//   - With SkipDefaultTransaction and no transaction of the caller's, a
//     multi-row update that matched only some rows has written those
//     (ErrConflict still reports it), and a refused child does not undo its
//     parent. A Save of a slice opens its own transaction.
//   - The in-memory version follows the statement, not an enclosing
//     transaction the caller later rolls back.
package hooks
