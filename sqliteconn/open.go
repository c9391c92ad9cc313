package sqliteconn

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// Options tunes Open; the zero value is what connstore's tests use.
type Options struct {
	// Config is the gorm configuration; nil means &gorm.Config{}.
	// PrepareStmt may be set: prepared statements pass through the same
	// write slot.
	Config *gorm.Config
	// MaxWait bounds the wait for the write lock when the context has no
	// deadline; 0 means 30 seconds. A transaction that writes through the
	// handle while another transaction of the same goroutine holds the
	// write lock would otherwise wait forever: it ends after MaxWait with
	// context.DeadlineExceeded.
	MaxWait time.Duration
	// MaxOpenConns caps the pool (readers run beside the one writer); 0
	// means 16. An in-memory database has one connection, since each
	// connection to ":memory:" is a database of its own.
	MaxOpenConns int
}

// lockPoll is SQLite's own busy timeout under Open: how long one attempt
// waits inside the driver, where no context can interrupt it, for a write
// lock held by another process. Writers of this process never wait there:
// they queue for the handle's write slot first.
const lockPoll = 25 * time.Millisecond

// DSN is a mattn/go-sqlite3 DSN for path that makes a plain handle (one not
// opened by Open) safe for concurrent writers: WAL, immediate write
// transactions, foreign keys, and a five-second busy timeout. Such a handle
// satisfies repository.New, but its writers wait for each other inside
// SQLite: the wait is not in arrival order, a context cannot end it, and
// it ends with "database is locked" after the timeout. Prefer Open.
func DSN(path string) string {
	return dsn(path, 5*time.Second)
}

func dsn(path string, busy time.Duration) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(busy.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "on")
	return "file:" + uriPath.Replace(path) + "?" + q.Encode()
}

// uriPath escapes what a file: URI would read as something else in a path:
// '?' (the query, where the driver looks for its settings), '#' (a
// fragment, cutting the name short) and '%' (an escape). SQLite decodes
// them back to the file's real name.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Open opens (creating if needed) the SQLite database at path, a file path
// without a "file:" prefix or query.
//
// The handle has one write slot: a statement that writes, and every
// transaction, waits for it in arrival order, for as long as its context
// allows, and returns the context's error (context.DeadlineExceeded) when
// that runs out — never "database is locked" because another goroutine of
// this process was writing. Reads run on their own connections beside the
// writer (WAL). A write outside a transaction runs inside BEGIN IMMEDIATE …
// COMMIT, so a lock held by another process is met where waiting is safe
// and is waited for, with the context, too.
func Open(path string, opts Options) (*gorm.DB, error) {
	if opts.Config == nil {
		opts.Config = &gorm.Config{}
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 30 * time.Second
	}
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 16
	}
	if path == ":memory:" || strings.Contains(path, "mode=memory") {
		opts.MaxOpenConns = 1
	}
	c := &connector{dsn: dsn(path, lockPoll), inner: &sqlite3.SQLiteDriver{}, slot: &writeLock{}, maxWait: opts.MaxWait}
	raw := sql.OpenDB(c)
	raw.SetMaxOpenConns(opts.MaxOpenConns)
	raw.SetMaxIdleConns(opts.MaxOpenConns)
	db, err := gorm.Open(sqlite.Dialector{DriverName: sqlite.DriverName, DSN: c.dsn, Conn: raw}, opts.Config)
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Opened reports whether raw is a handle from Open.
func Opened(raw *sql.DB) bool {
	_, ok := raw.Driver().(Driver)
	return ok
}
