// Package dialect is the one place where PostgreSQL and SQLite differ for
// the store's statements: row locks, the database clock, planner settings,
// advisory locks, the index a statement must read, how a statement names
// the rows it picked, LISTEN, and what makes a SQLite handle safe. The
// repository asks its Dialect; it never branches on the database itself
// (make lint checks).
package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Dialect is what differs between the databases.
type Dialect interface {
	// Name is gorm's name of the dialect ("postgres", "sqlite").
	Name() string
	// NowMillis is the database server's clock in epoch milliseconds, as an
	// SQL expression (SQLite runs in-process: its clock is the host's).
	NowMillis() string
	// LockRows makes q lock the rows it reads until the transaction ends:
	// FOR UPDATE (or FOR SHARE), SKIP LOCKED when asked. SQLite's single
	// writer already serializes writers: q is unchanged.
	LockRows(q *gorm.DB, share, skipLocked bool) *gorm.DB
	// ReadIndex makes q read table through index. SQLite has no statistics
	// to choose a partial index by itself, and named, the index is used or
	// the statement fails, never a silent scan; PostgreSQL plans by its
	// statistics (and the plan settings): q is unchanged.
	ReadIndex(q *gorm.DB, table, index string) *gorm.DB
	// FixedLimit is q.Limit(n) with n written into the statement as a
	// number, where gorm sends it as a parameter to PostgreSQL (SQLite's
	// driver writes it as a number already): a generic plan then knows how
	// many rows the statement wants, as a custom plan does. A plan that
	// thinks a parameter LIMIT lets through a tenth of its input joins a
	// claim's picked keys to the table by hashing the whole table.
	FixedLimit(q *gorm.DB, n int) *gorm.DB
	// XactLock takes a transaction-scoped lock on (namespace, the schema and
	// key) on PostgreSQL; SQLite's write transaction already serializes.
	XactLock(tx *gorm.DB, namespace int64, key string) error
	// XactLockPartitioned is XactLock with an empty key, and reports in the
	// same round trip whether table's rows may live in other heaps
	// (declarative partitions, or inheritance children) on PostgreSQL.
	XactLockPartitioned(tx *gorm.DB, namespace int64, table string) (partitioned bool, err error)
	// WithPlanSettings runs fn with planner settings changed for fn only
	// (PostgreSQL): set for the transaction, and put back after fn when
	// restore is set (a caller's transaction goes on). SQLite has none.
	WithPlanSettings(tx *gorm.DB, settings []Setting, restore bool, fn func() error) error
	// RowIDColumns are the extra columns (", a, b") a window selects so the
	// statement acting on its rows can find them by physical id: those of
	// the rows of from (a table or an alias in the window's FROM; "" for
	// the window's only table), under their own names.
	RowIDColumns(from string) string
	// PickRows is the condition (and its values) that makes a statement act
	// on the rows sel picks: by physical id on PostgreSQL (by partition and
	// id on a partitioned table, where ids repeat per partition), by the
	// key columns on SQLite. sel renders the picking query selecting the
	// named columns of its rows (alias o).
	PickRows(partitioned bool, keyColumns string, sel func(columns string) *gorm.DB) (string, []any)
	// Lateral reports whether a subquery in FROM may read the columns of an
	// earlier FROM item, its LIMIT included (LATERAL): a per-row limit is
	// then one statement. SQLite has no LATERAL, and its LIMIT cannot read
	// an outer row even in a correlated subquery.
	Lateral() bool
	// Listens reports whether the database announces recorded operations
	// (LISTEN/NOTIFY).
	Listens() bool
	// Listen holds a connection of db listening on channel, calling wake
	// for announcements about table's schema, until ctx ends or the
	// connection fails (ErrNoListen where Listens is false).
	Listen(ctx context.Context, db *sql.DB, channel, table string, wake func()) error
	// UnsafePool says what makes a pooled handle unsafe for concurrent
	// writers ("" when nothing does).
	UnsafePool(db *gorm.DB) (problem string, err error)
}

// Setting is one planner setting and the value a statement needs.
type Setting struct{ Name, Value string }

// Of returns db's dialect; the store runs on PostgreSQL and SQLite only,
// any other database is an error.
func Of(db *gorm.DB) (Dialect, error) {
	switch name := db.Dialector.Name(); name {
	case "postgres":
		return postgres{}, nil
	case "sqlite":
		return sqlite{}, nil
	default:
		return nil, fmt.Errorf("the store runs on PostgreSQL and SQLite, not %s", name)
	}
}

type postgres struct{}

func (postgres) Name() string { return "postgres" }

func (postgres) NowMillis() string {
	return "FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::bigint"
}

func (postgres) LockRows(q *gorm.DB, share, skipLocked bool) *gorm.DB {
	l := clause.Locking{Strength: clause.LockingStrengthUpdate}
	if share {
		l.Strength = clause.LockingStrengthShare
	}
	if skipLocked {
		l.Options = clause.LockingOptionsSkipLocked
	}
	return q.Clauses(l)
}

func (postgres) ReadIndex(q *gorm.DB, _, _ string) *gorm.DB { return q }

func (postgres) FixedLimit(q *gorm.DB, n int) *gorm.DB { return q.Clauses(fixedLimit(n)) }

// fixedLimit is a LIMIT clause written as a number. The number is an int,
// so writing it into the text cannot change the statement's meaning.
type fixedLimit int

// Name is the clause gorm builds it as, in place of clause.Limit.
func (fixedLimit) Name() string { return "LIMIT" }

// Build writes LIMIT n.
func (l fixedLimit) Build(b clause.Builder) {
	b.WriteString("LIMIT ")
	b.WriteString(strconv.Itoa(int(l)))
}

// MergeClause makes l the statement's LIMIT (the last one set wins, as
// with clause.Limit).
func (l fixedLimit) MergeClause(c *clause.Clause) {
	c.Name = ""
	c.Expression = l
}

func (postgres) XactLock(tx *gorm.DB, namespace int64, key string) error {
	return tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema() || ?))", namespace, key).Error
}

func (postgres) XactLockPartitioned(tx *gorm.DB, namespace int64, table string) (bool, error) {
	var partitioned bool
	// Declarative partitions (relkind 'p') and inheritance children
	// (relhassubclass) both put rows of the table in other heaps, whose
	// physical ids repeat the parent's.
	err := tx.Raw(`SELECT c.relkind = 'p' OR c.relhassubclass FROM pg_advisory_xact_lock(?, hashtext(current_schema() || '')) AS l,
		pg_class c WHERE c.oid = CAST(? AS regclass)`, namespace, table).Row().Scan(&partitioned)
	return partitioned, err
}

func (postgres) WithPlanSettings(tx *gorm.DB, settings []Setting, restore bool, fn func() error) error {
	// Every setting read and changed in one round trip.
	cols, vars := make([]string, len(settings)), make([]any, 0, 3*len(settings))
	for i, s := range settings {
		cols[i] = "current_setting(?), set_config(?, ?, true)"
		vars = append(vars, s.Name, s.Name, s.Value)
	}
	old, set := make([]string, len(settings)), make([]string, len(settings))
	dest := make([]any, 0, 2*len(settings))
	for i := range settings {
		dest = append(dest, &old[i], &set[i])
	}
	if err := tx.Raw("SELECT "+strings.Join(cols, ", "), vars...).Row().Scan(dest...); err != nil {
		return err
	}
	if err := fn(); err != nil || !restore {
		return err
	}
	for i, s := range settings {
		if err := tx.Exec("SELECT set_config(?, ?, true)", s.Name, old[i]).Error; err != nil {
			return err
		}
	}
	return nil
}

func (postgres) RowIDColumns(from string) string {
	if from == "" {
		return ", tableoid, ctid"
	}
	return ", " + from + ".tableoid AS tableoid, " + from + ".ctid AS ctid"
}

func (postgres) PickRows(partitioned bool, _ string, sel func(string) *gorm.DB) (string, []any) {
	// The ids drive the scan (an array the statement computes once, read by
	// TID, so no plan re-runs the picking query per row); on a partitioned
	// table the (partition, id) pairs, a second reading of it, filter what
	// the scan finds.
	if partitioned {
		return "ctid = ANY(ARRAY(?)) AND (tableoid, ctid) IN (?)", []any{sel("o.ctid"), sel("o.tableoid, o.ctid")}
	}
	return "ctid = ANY(ARRAY(?))", []any{sel("o.ctid")}
}

func (postgres) Lateral() bool { return true }

func (postgres) Listens() bool { return true }

func (postgres) UnsafePool(*gorm.DB) (string, error) { return "", nil }

type sqlite struct{}

func (sqlite) Name() string { return "sqlite" }

func (sqlite) NowMillis() string { return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)" }

func (sqlite) LockRows(q *gorm.DB, _, _ bool) *gorm.DB { return q }

func (sqlite) ReadIndex(q *gorm.DB, table, index string) *gorm.DB {
	return q.Table(table + " INDEXED BY " + index)
}

func (sqlite) XactLock(*gorm.DB, int64, string) error { return nil }

func (sqlite) XactLockPartitioned(*gorm.DB, int64, string) (bool, error) { return false, nil }

func (sqlite) FixedLimit(q *gorm.DB, n int) *gorm.DB { return q.Limit(n) }

func (sqlite) WithPlanSettings(_ *gorm.DB, _ []Setting, _ bool, fn func() error) error { return fn() }

func (sqlite) RowIDColumns(string) string { return "" }

func (sqlite) PickRows(_ bool, keyColumns string, sel func(string) *gorm.DB) (string, []any) {
	pick := "o." + strings.ReplaceAll(keyColumns, ", ", ", o.")
	return "(" + keyColumns + ") IN (?)", []any{sel(pick)}
}

func (sqlite) Lateral() bool { return false }

func (sqlite) Listens() bool { return false }

func (sqlite) UnsafePool(db *gorm.DB) (string, error) {
	raw, err := db.DB()
	if err != nil {
		return "", nil // a transaction handle: its pool was checked when it was opened
	}
	return unsafeSQLite(raw)
}
