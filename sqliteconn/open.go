package sqliteconn

import (
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// Options tunes Open; the zero value is what connstore's tests use.
type Options struct {
	// Config is the gorm configuration; nil means &gorm.Config{}.
	Config *gorm.Config
	// MaxWait bounds the wait for the write lock when the context has no
	// earlier deadline; 0 means 30 seconds.
	MaxWait time.Duration
	// MaxOpenConns caps the pool; 0 means 16.
	MaxOpenConns int
}

// lockPoll is SQLite's own busy timeout: how long one attempt waits for the
// write lock inside the driver, where no context can interrupt it.
const lockPoll = 25 * time.Millisecond

// DSN is the mattn/go-sqlite3 DSN Open uses for path: WAL, a short busy
// timeout, immediate write transactions and foreign keys. A handle opened on
// it without Open's pool still satisfies repository.New, but waits for the
// write lock are then bounded by the busy timeout, not the context.
func DSN(path string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(lockPoll.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "on")
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the SQLite database at path.
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
	raw, err := sql.Open(sqlite.DriverName, DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	raw.SetMaxOpenConns(opts.MaxOpenConns)
	db, err := gorm.Open(sqlite.Dialector{DriverName: sqlite.DriverName, DSN: DSN(path),
		Conn: &pool{db: raw, maxWait: opts.MaxWait}}, opts.Config)
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// isBusy reports SQLite's "the write lock is taken" errors.
func isBusy(err error) bool {
	e, ok := err.(sqlite3.Error)
	return ok && (e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked)
}
