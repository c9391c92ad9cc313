package hooks

import (
	"errors"

	"gorm.io/gorm"
)

// Name is the plugin's registered name.
const Name = "connstore:optimistic_lock"

const (
	createName   = Name + ":create"
	checkName    = Name + ":check"
	verifyName   = Name + ":verify"
	skipKey      = "connstore:skip_lock"
	keepLockKey  = "connstore:keep_lock_on_conflict"
	readStateKey = "connstore:lock_read"
)

// Config configures the plugin.
type Config struct {
	// NewIDFunc returns a fresh incarnation id; defaults to NewUUID.
	NewIDFunc func() string
}

// Plugin is the optimistic-locking gorm.Plugin.
type Plugin struct {
	newID func() string
	locks lockCache
}

// New returns the plugin with cfg's defaults filled in.
func New(cfg Config) *Plugin {
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = NewUUID
	}
	return &Plugin{newID: cfg.NewIDFunc}
}

// Name implements gorm.Plugin.
func (p *Plugin) Name() string { return Name }

// Initialize implements gorm.Plugin; db.Use calls it once. A second db.Use
// of any plugin with this Name returns gorm.ErrRegistered and leaves the
// first bound. Calling Initialize of another Plugin directly re-binds the
// callbacks to it (its id source) instead of stacking a second guard.
func (p *Plugin) Initialize(db *gorm.DB) error {
	create, update := db.Callback().Create(), db.Callback().Update()
	var errs []error
	if create.Get(createName) == nil {
		errs = append(errs, create.Before("gorm:create").Register(createName, p.beforeCreate))
	} else {
		errs = append(errs, create.Replace(createName, p.beforeCreate))
	}
	if update.Get(checkName) == nil {
		errs = append(errs, update.Before("gorm:update").Register(checkName, p.beforeUpdate))
	} else {
		errs = append(errs, update.Replace(checkName, p.beforeUpdate))
	}
	if update.Get(verifyName) == nil {
		errs = append(errs, update.After("gorm:update").Register(verifyName, p.afterUpdate))
	} else {
		errs = append(errs, update.Replace(verifyName, p.afterUpdate))
	}
	return errors.Join(errs...)
}

// SkipLock returns a session whose writes bypass the guard: no version
// check, no bump, no incarnation seeding. Use it only on a path that owns its
// own conflict rule.
func SkipLock(db *gorm.DB) *gorm.DB { return db.Set(skipKey, true) }

// KeepLockOnConflict returns a session whose upserts leave a stored row's
// version and incarnation exactly as they are on conflict (no bump), for an
// upsert that is deliberately not a compare-and-swap write. Inserts are
// still seeded.
func KeepLockOnConflict(db *gorm.DB) *gorm.DB { return db.Set(keepLockKey, true) }

// Registered reports whether the plugin is registered on db.
func Registered(db *gorm.DB) bool {
	_, ok := db.Config.Plugins[Name]
	return ok
}

func skipped(db *gorm.DB) bool {
	v, ok := db.Get(skipKey)
	return ok && v == true
}
