// Package hooks provides the optimistic-locking guard as a gorm.Plugin.
//
// Register it once with db.Use(hooks.New(hooks.Config{})). Any model that
// embeds models.Lock (version + incarnation) or models.VersionLock (version
// only) is then guarded:
//
//   - Create writes version 0 and, for models.Lock, a fresh incarnation from
//     the configured id source.
//   - An update of one row loaded into a model adds
//     WHERE version = <read> [AND incarnation = <read>] and writes
//     version = <read> + 1. Zero rows affected is ErrConflict, never a silent
//     success. A missing incarnation is ErrMissingLock.
//   - An update with no primary key on the model (a set-based UPDATE) cannot
//     compare a read version; it still bumps version = version + 1 so that
//     every guarded reader of those rows sees the write.
//
// A path that must not bump or check the version (an upsert that owns its
// own conflict rule) opts out visibly with SkipLock.
package hooks
