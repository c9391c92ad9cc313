package sqliteconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Driver is the database/sql driver of a handle from Open: mattn's SQLite
// driver with every write passing through the handle's write slot. It is
// exported so a caller (repository.New) can recognise such a handle; its
// Open refuses to be used by name, since the slot belongs to one handle.
type Driver struct{ c *connector }

// Open implements driver.Driver; handles come from sqliteconn.Open only.
func (Driver) Open(string) (driver.Conn, error) {
	return nil, errors.New("sqliteconn: open handles with sqliteconn.Open")
}

// connector makes the connections of one handle, all sharing its slot.
type connector struct {
	dsn     string
	inner   *sqlite3.SQLiteDriver
	slot    *writeLock
	maxWait time.Duration
}

// Connect implements driver.Connector.
func (c *connector) Connect(context.Context) (driver.Conn, error) {
	dc, err := c.inner.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(*sqlite3.SQLiteConn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("sqliteconn: unexpected connection type %T", dc)
	}
	return &conn{SQLiteConn: sc, c: c}, nil
}

// Driver implements driver.Connector.
func (c *connector) Driver() driver.Driver { return Driver{c: c} }

// conn is one SQLite connection. It holds the slot from the first write
// until SQLite is back in autocommit mode: for a transaction that is from
// BEGIN to COMMIT or ROLLBACK, for a statement outside one until it is done
// (for a query, until its rows are closed). Embedding keeps every optional
// interface of mattn's connection; the methods below are the ones that run
// statements or transactions.
type conn struct {
	*sqlite3.SQLiteConn
	c    *connector
	held bool
}

// take holds the slot for a statement of kind k, unless this connection
// already holds it (inside a transaction) or k only reads.
func (c *conn) take(ctx context.Context, k kind) error {
	if c.held || k == reads {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok && c.c.maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.c.maxWait)
		defer cancel()
	}
	if err := c.c.slot.lock(ctx); err != nil {
		return fmt.Errorf("sqliteconn: waiting for the write lock: %w", err)
	}
	c.held = true
	return nil
}

// settle gives the slot back once SQLite is in autocommit mode again, so a
// transaction opened or closed by a plain statement (BEGIN, COMMIT,
// SAVEPOINT, RELEASE) keeps or frees it exactly as SQLite does.
func (c *conn) settle() {
	if c.held && c.SQLiteConn.AutoCommit() {
		c.held = false
		c.c.slot.unlock()
	}
}

// statement is what conn and stmt share: run a statement of kind k.
type statement struct {
	k     kind
	exec  func(context.Context) (driver.Result, error)
	query func(context.Context) (driver.Rows, error)
}

func (c *conn) execute(ctx context.Context, s statement) (driver.Result, error) {
	if err := c.take(ctx, s.k); err != nil {
		return nil, err
	}
	defer c.settle()
	switch {
	case s.k == reads:
		return s.exec(ctx)
	case s.k == changesRows && c.SQLiteConn.AutoCommit():
		if err := c.begin(ctx); err != nil {
			return nil, err
		}
		res, err := s.exec(ctx)
		return res, c.end(err)
	default:
		// Inside a transaction the slot and SQLite's lock are already ours;
		// outside one, a statement that cannot run in a transaction is
		// retried whole while another process holds the lock.
		return retryBusy(ctx, func() (driver.Result, error) { return s.exec(ctx) })
	}
}

func (c *conn) run(ctx context.Context, s statement) (driver.Rows, error) {
	if err := c.take(ctx, s.k); err != nil {
		return nil, err
	}
	if s.k == changesRows && c.SQLiteConn.AutoCommit() {
		if err := c.begin(ctx); err != nil {
			c.settle()
			return nil, err
		}
		rows, err := s.query(ctx)
		if err != nil {
			err = c.end(err)
			c.settle()
			return nil, err
		}
		return &committingRows{Rows: rows, c: c}, nil
	}
	rows, err := s.query(ctx)
	if err != nil {
		c.settle()
		return nil, err
	}
	if c.held && c.SQLiteConn.AutoCommit() {
		// A write outside a transaction that could not be wrapped (PRAGMA,
		// DDL returning rows): hold the slot until its rows are closed.
		return &committingRows{Rows: rows, c: c, plain: true}, nil
	}
	return rows, nil
}

// begin opens the transaction a write outside one runs in, waiting (with
// ctx) while another process holds SQLite's lock.
func (c *conn) begin(ctx context.Context) error {
	_, err := retryBusy(ctx, func() (driver.Result, error) {
		return c.SQLiteConn.ExecContext(ctx, "BEGIN IMMEDIATE", nil)
	})
	return err
}

// end commits the transaction begin opened, or rolls it back when the
// statement failed or the commit did; it returns the first error.
func (c *conn) end(err error) error {
	if err == nil {
		_, err = c.SQLiteConn.ExecContext(context.Background(), "COMMIT", nil)
	}
	if err != nil && !c.SQLiteConn.AutoCommit() {
		_, _ = c.SQLiteConn.ExecContext(context.Background(), "ROLLBACK", nil)
	}
	return err
}

// ExecContext implements driver.ExecerContext.
func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.execute(ctx, statement{k: classify(query), exec: func(ctx context.Context) (driver.Result, error) {
		return c.SQLiteConn.ExecContext(ctx, query, args)
	}})
}

// QueryContext implements driver.QueryerContext.
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.run(ctx, statement{k: classify(query), query: func(ctx context.Context) (driver.Rows, error) {
		return c.SQLiteConn.QueryContext(ctx, query, args)
	}})
}

// Exec and Query (the pre-context forms) run through the same path.
func (c *conn) Exec(query string, args []driver.Value) (driver.Result, error) {
	return c.ExecContext(context.Background(), query, named(args))
}

// Query implements driver.Queryer.
func (c *conn) Query(query string, args []driver.Value) (driver.Rows, error) {
	return c.QueryContext(context.Background(), query, named(args))
}

// PrepareContext implements driver.ConnPrepareContext: a prepared statement
// runs through the same slot (gorm's PrepareStmt works unchanged).
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	ds, err := c.SQLiteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	ss, ok := ds.(*sqlite3.SQLiteStmt)
	if !ok {
		_ = ds.Close()
		return nil, fmt.Errorf("sqliteconn: unexpected statement type %T", ds)
	}
	k := classify(query)
	if k == reads && !ss.Readonly() {
		k = other
	}
	return &stmt{SQLiteStmt: ss, c: c, k: k}, nil
}

// Prepare implements driver.Conn.
func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// BeginTx implements driver.ConnBeginTx. Every transaction takes the slot
// and SQLite's lock when it begins (BEGIN IMMEDIATE), read-only or not: a
// deferred transaction that later writes would have to upgrade its lock,
// and an upgrade that meets another writer fails at once, whatever the
// busy timeout.
func (c *conn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	if err := c.take(ctx, other); err != nil {
		return nil, err
	}
	if err := c.begin(ctx); err != nil {
		c.settle()
		return nil, err
	}
	return tx{c}, nil
}

// Begin implements driver.Conn.
func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// Close implements driver.Conn; a connection closed while holding the slot
// (a broken one) gives it back.
func (c *conn) Close() error {
	err := c.SQLiteConn.Close()
	if c.held {
		c.held = false
		c.c.slot.unlock()
	}
	return err
}

// tx is a transaction begun by BeginTx.
type tx struct{ c *conn }

// Commit implements driver.Tx.
func (t tx) Commit() error {
	err := t.c.end(nil)
	t.c.settle()
	return err
}

// Rollback implements driver.Tx.
func (t tx) Rollback() error {
	_, err := t.c.SQLiteConn.ExecContext(context.Background(), "ROLLBACK", nil)
	t.c.settle()
	if err != nil && !t.c.SQLiteConn.AutoCommit() {
		// Still in a transaction and holding the slot: this connection
		// cannot be reused; database/sql closes it, which frees the slot.
		return driver.ErrBadConn
	}
	return err
}

// stmt is a prepared statement of conn.
type stmt struct {
	*sqlite3.SQLiteStmt
	c *conn
	k kind
}

// ExecContext implements driver.StmtExecContext.
func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.execute(ctx, statement{k: s.k, exec: func(ctx context.Context) (driver.Result, error) {
		return s.SQLiteStmt.ExecContext(ctx, args)
	}})
}

// QueryContext implements driver.StmtQueryContext.
func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.run(ctx, statement{k: s.k, query: func(ctx context.Context) (driver.Rows, error) {
		return s.SQLiteStmt.QueryContext(ctx, args)
	}})
}

// Exec implements driver.Stmt.
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

// Query implements driver.Stmt.
func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

// committingRows are the rows of a write run outside a transaction: closing
// them commits the transaction it ran in (or, plain, just settles) and gives
// the slot back.
type committingRows struct {
	driver.Rows
	c     *conn
	plain bool
}

// Close implements driver.Rows.
func (r *committingRows) Close() error {
	err := r.Rows.Close()
	if !r.plain {
		err = errors.Join(err, r.c.end(nil))
	}
	r.c.settle()
	return err
}

// ColumnTypeDatabaseTypeName keeps the column types gorm's migrator reads.
func (r *committingRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func named(args []driver.Value) []driver.NamedValue {
	list := make([]driver.NamedValue, len(args))
	for i, v := range args {
		list[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return list
}
