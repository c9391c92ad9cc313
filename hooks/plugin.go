package hooks

import (
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Name is the plugin's registered name.
const Name = "connstore:optimistic_lock"

const (
	createName       = Name + ":create"
	createDoneName   = Name + ":create_done"
	createSettleName = Name + ":create_settle"
	checkName        = Name + ":check"
	verifyName       = Name + ":verify"
	settleName       = Name + ":settle"
	skipKey          = "connstore:skip_lock"
	keepLockKey      = "connstore:keep_lock_on_conflict"
	readStateKey     = "connstore:lock_read"
	rowsStateKey     = "connstore:lock_rows"
)

// Config configures the plugin.
type Config struct {
	// NewIDFunc returns a fresh incarnation id; defaults to NewUUID.
	NewIDFunc func() string
	// Models are locked models (pointers to their structs, as AutoMigrate
	// takes them) whose tables the plugin must recognise before it has seen
	// a write through them: a write that names the table with no model,
	// db.Table("app_account").Where(...).Updates(map), then bumps the
	// version. Tables of locked models the plugin has written through are
	// recognised as well; registering them here makes that independent of
	// what ran first. A model without a lock is an error from db.Use.
	Models []any
}

// Plugin is the optimistic-locking gorm.Plugin.
type Plugin struct {
	newID  func() string
	models []any
	locks  lockCache
}

// New returns the plugin with cfg's defaults filled in.
func New(cfg Config) *Plugin {
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = NewUUID
	}
	return &Plugin{newID: cfg.NewIDFunc, models: cfg.Models}
}

// Name implements gorm.Plugin.
func (p *Plugin) Name() string { return Name }

// Initialize implements gorm.Plugin; db.Use calls it once. A second db.Use
// of any plugin with this Name returns gorm.ErrRegistered and leaves the
// first bound. Calling Initialize of another Plugin directly re-binds the
// callbacks to it (its id source) instead of stacking a second guard.
//
// The checks that decide a write (a conflict, the insert of a row a Save
// found absent) run right after gorm's own statement, before associations
// are saved and before the default transaction commits, so a refused
// parent leaves neither children nor itself behind. The in-memory version
// is settled last, once the outcome of the whole statement is known.
func (p *Plugin) Initialize(db *gorm.DB) error {
	create, update := db.Callback().Create(), db.Callback().Update()
	const afterAll = "gorm:commit_or_rollback_transaction" // sorts last, present or not
	errs := []error{
		bind(create, create.Before("gorm:create"), createName, p.beforeCreate),
		bind(create, create.Before("gorm:save_after_associations"), createDoneName, p.createDone),
		bind(create, create.After(afterAll), createSettleName, p.settleCreate),
		bind(update, update.Before("gorm:update"), checkName, p.beforeUpdate),
		bind(update, update.Before("gorm:save_after_associations"), verifyName, p.verifyUpdate),
		bind(update, update.After(afterAll), settleName, p.settleUpdate),
	}
	errs = append(errs, installScanRows(db))
	for i, m := range p.models {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(m); err != nil {
			errs = append(errs, fmt.Errorf("hooks: Config.Models[%d]: %w", i, err))
			continue
		}
		switch lf := p.locks.ofSchema(stmt.Schema); {
		case lf == nil:
			errs = append(errs, fmt.Errorf("hooks: Config.Models[%d]: %s holds no models.Lock or models.VersionLock",
				i, stmt.Schema.Name))
		case lf.err != nil:
			errs = append(errs, lf.err)
		}
	}
	return errors.Join(errs...)
}

// chain is the part of a gorm callback processor bind needs.
type chain interface {
	Get(name string) func(*gorm.DB)
	Replace(name string, fn func(*gorm.DB)) error
}

// bind registers fn under name at its place in the chain, or re-binds an
// existing registration to fn (which keeps its place).
func bind(c chain, at interface {
	Register(name string, fn func(*gorm.DB)) error
}, name string, fn func(*gorm.DB)) error {
	if c.Get(name) != nil {
		return c.Replace(name, fn)
	}
	return at.Register(name, fn)
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
