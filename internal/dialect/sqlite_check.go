package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/connstore/connstore/sqliteconn"
)

const sqliteFix = "open it with sqliteconn.Open, or use a DSN with _journal_mode=WAL&_busy_timeout=5000&_txlock=immediate, " +
	"or give the pool a single connection (SetMaxOpenConns(1))"

// unsafeSQLite says what is missing from a pooled SQLite handle without
// WAL, a busy timeout or immediate write transactions ("" when nothing
// is): correctness under concurrency depends on all three, and none of them
// is visible in an error until writers race.
func unsafeSQLite(raw *sql.DB) (string, error) {
	if raw.Stats().MaxOpenConnections == 1 || sqliteconn.Opened(raw) {
		// One connection is one writer, and a handle from sqliteconn.Open
		// queues its writers itself: nothing races for SQLite's lock.
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mode string
	var busy int64
	if err := raw.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return "", fmt.Errorf("check sqlite: %w", err)
	}
	if err := raw.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return "", fmt.Errorf("check sqlite: %w", err)
	}
	switch immediate, err := beginsImmediate(ctx, raw); {
	case err != nil:
		return "", fmt.Errorf("check sqlite: %w", err)
	case !strings.EqualFold(mode, "wal"):
		return fmt.Sprintf("journal mode is %s, not WAL; %s", mode, sqliteFix), nil
	case busy <= 0:
		return "no busy timeout; " + sqliteFix, nil
	case !immediate:
		return "transactions begin deferred, not immediate; " + sqliteFix, nil
	}
	return "", nil
}

// beginsImmediate reports whether a transaction of raw takes the write lock
// when it begins: while one is open, another connection that will not wait
// must fail to take the lock.
func beginsImmediate(ctx context.Context, raw *sql.DB) (bool, error) {
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	conn, err := raw.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	var busy int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return false, err
	}
	defer func() { _, _ = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busy)) }()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy"), nil
	}
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	return false, err
}
