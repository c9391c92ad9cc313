package repository

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Options configures a Repository. The zero value is usable.
type Options struct {
	// NowFunc is the clock; defaults to time.Now.
	NowFunc func() time.Time
	// NewIDFunc returns fresh random ids (lease tokens); defaults to
	// hooks.NewUUID. Incarnations come from the hooks plugin's own source.
	NewIDFunc func() string
	// Backoff schedules re-drives of failed operations; defaults to
	// DefaultBackoff().
	Backoff BackoffPolicy
	// LeaseClock is the clock leases are taken and checked by; the zero
	// value is AppLeaseClock (NowFunc).
	LeaseClock LeaseClock
	// Logger receives the repository's events (CAS retries, lost leases,
	// refusals, claims, collections) as structured records; nil is silent.
	Logger *slog.Logger
	// Observer sees every call and event, for metrics and tracing; nil
	// observes nothing.
	Observer Observer
	// ProgressCache is how many sync-state rows UpdateSyncProgress
	// remembers its last write of, to update them in one round trip (see
	// UpdateSyncProgress); 0 means DefaultProgressCache, negative disables.
	ProgressCache int
}

// Repository is the connstore store API over one *gorm.DB.
type Repository struct {
	db         *gorm.DB
	sess       *gorm.DB // db as every call starts from it (see session)
	now        func() time.Time
	newID      func() string
	backoff    BackoffPolicy
	leaseClock LeaseClock
	log        *slog.Logger
	obs        Observer
	scopes     []scopes.Scope
	dialect    dialect.Dialect  // what differs between the databases
	returnOps  clause.Returning // every operation column, by name (see returning)
	progress   *progressCache   // shared by WithTx/WithScopes copies; see progressCached
	cas        store.CAS        // the CAS statements rendered for db's dialect
	err        error            // refuses every call (a handle without the plugin)
}

// New returns a repository on db, which must have the hooks plugin
// registered: without it guarded writes would silently lose updates. A
// pooled SQLite handle must use WAL, a busy timeout and immediate write
// transactions (see package sqliteconn); New refuses one that does not with
// ErrUnsafeSQLite.
func New(db *gorm.DB, opts Options) (*Repository, error) {
	if db == nil {
		return nil, invalid("db is nil")
	}
	if !hooks.Registered(db) {
		return nil, ErrPluginMissing
	}
	d, err := dialect.Of(db)
	if err != nil {
		return nil, fmt.Errorf("new repository: %w: %w", ErrInvalidInput, err)
	}
	switch problem, err := d.UnsafePool(db); {
	case err != nil:
		return nil, err
	case problem != "":
		return nil, fmt.Errorf("%w: %s", ErrUnsafeSQLite, problem)
	}
	if opts.NowFunc == nil {
		opts.NowFunc = time.Now
	}
	if opts.NewIDFunc == nil {
		opts.NewIDFunc = hooks.NewUUID
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff()
	}
	if v, ok := opts.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("new repository: %w", err)
		}
	}
	if opts.LeaseClock != AppLeaseClock && opts.LeaseClock != DatabaseLeaseClock {
		return nil, invalid("unknown lease clock %d", opts.LeaseClock)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	returnOps, err := returning(db, &models.Operation{})
	if err != nil {
		return nil, err
	}
	return &Repository{db: db, sess: session(db), now: opts.NowFunc, newID: opts.NewIDFunc, backoff: opts.Backoff,
		leaseClock: opts.LeaseClock, log: opts.Logger, obs: opts.Observer, dialect: d, returnOps: returnOps,
		progress: newProgressCache(opts.ProgressCache), cas: store.NewCAS(db)}, nil
}

// WithTx returns a repository whose calls run in the caller's transaction
// (or on any other handle of the caller's). The handle must carry the hooks
// plugin: without it every call of the returned repository fails with
// ErrPluginMissing rather than writing unguarded.
func (r *Repository) WithTx(tx *gorm.DB) *Repository {
	cp := *r
	if tx == nil {
		cp.err = fmt.Errorf("with tx: %w", invalid("tx is nil"))
		return &cp
	}
	cp.db, cp.sess, cp.err = tx, session(tx), nil
	if !hooks.Registered(tx) {
		cp.err = fmt.Errorf("%w: the handle given to WithTx has none", ErrPluginMissing)
	}
	return &cp
}

// Transaction runs fn in one transaction, committed when fn returns nil and
// rolled back otherwise. fn gets the transaction itself, for the
// application's own writes, and a repository bound to it.
func (r *Repository) Transaction(ctx context.Context, fn func(tx *gorm.DB, repo *Repository) error) error {
	if r.err != nil {
		return r.err
	}
	if fn == nil {
		return fmt.Errorf("transaction: %w", invalid("fn is nil"))
	}
	return r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return fn(tx, r.WithTx(tx)) })
}

// conn is the handle for one call: bound to ctx, without gorm's implicit
// per-statement transaction (every single statement is already atomic),
// logging through quietLogger, with the repository's scopes applied. Reads
// through it may go to a read replica.
func (r *Repository) conn(ctx context.Context) *gorm.DB {
	db := r.base(ctx)
	if len(r.scopes) > 0 {
		db = db.Scopes(r.scopes...)
	}
	if r.err != nil {
		_ = db.AddError(r.err)
	}
	return db
}

// base is conn without the scopes and the refusal.
func (r *Repository) base(ctx context.Context) *gorm.DB { return r.sess.WithContext(ctx) }

// returning names every column of model: RETURNING * of an UPDATE … FROM
// would also return the joined table's columns on PostgreSQL.
func returning(db *gorm.DB, model any) (clause.Returning, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return clause.Returning{}, fmt.Errorf("parse %T: %w", model, err)
	}
	cols := make([]clause.Column, len(stmt.Schema.DBNames))
	for i, name := range stmt.Schema.DBNames {
		cols[i] = clause.Column{Name: name}
	}
	return clause.Returning{Columns: cols}, nil
}

// session is db without gorm's implicit per-statement transaction (every
// single statement is already atomic), logging through quietLogger. It is
// built once per repository: a session per call costs a statement clone
// on every hot-path statement.
func session(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{SkipDefaultTransaction: true, Logger: quietLogger{db.Logger}})
}

// primary is conn for a read that a write depends on (or that must see the
// caller's own writes): with gorm.io/plugin/dbresolver registered it goes to
// the source, not a replica; without it the clause does nothing.
func (r *Repository) primary(ctx context.Context) *gorm.DB {
	return r.conn(ctx).Clauses(toPrimary{})
}

// nowMillis is the injected clock in epoch milliseconds.
func (r *Repository) nowMillis() int64 { return r.now().UnixMilli() }

// Now is the repository's clock (Options.NowFunc): the time it stamps on
// created_at, updated_at and next_attempt_at. Measure against it, not the
// host's clock, what those columns say (how long an operation waited).
func (r *Repository) Now() time.Time { return r.now() }

// takeOne reads the one row selected by scope from the primary,
// translating not-found.
func takeOne[T any](ctx context.Context, r *Repository, what string, key any, scope func(*gorm.DB) *gorm.DB) (*T, error) {
	var row T
	if err := r.primary(ctx).Scopes(scope).Take(&row).Error; err != nil {
		return nil, fmt.Errorf("get %s %v: %w", what, key, notFound(err))
	}
	return &row, nil
}
