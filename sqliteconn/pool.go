package sqliteconn

import (
	"context"
	"database/sql"
	"time"
)

// pool is the *sql.DB gorm talks to, with waits for the write lock retried
// until the caller's context (or maxWait) runs out. Only statements that
// can meet a taken lock are retried: BEGIN (IMMEDIATE) and autocommit
// statements; inside a transaction the lock is already held.
type pool struct {
	db      *sql.DB
	maxWait time.Duration
}

// retry runs op until it does not fail busy, the context ends, or maxWait
// passes; a context that ended is reported as its own error.
func retry[T any](ctx context.Context, p *pool, op func() (T, error)) (T, error) {
	deadline := time.Now().Add(p.maxWait)
	backoff := time.Millisecond
	for {
		v, err := op()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return v, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}

// BeginTx implements gorm.TxBeginner.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return retry(ctx, p, func() (*sql.Tx, error) { return p.db.BeginTx(ctx, opts) })
}

// ExecContext implements gorm.ConnPool.
func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return retry(ctx, p, func() (sql.Result, error) { return p.db.ExecContext(ctx, query, args...) })
}

// QueryContext implements gorm.ConnPool.
func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return retry(ctx, p, func() (*sql.Rows, error) { return p.db.QueryContext(ctx, query, args...) })
}

// QueryRowContext implements gorm.ConnPool; a *sql.Row defers its error, so
// it is not retried.
func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.db.QueryRowContext(ctx, query, args...)
}

// PrepareContext implements gorm.ConnPool.
func (p *pool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

// GetDBConn implements gorm.GetDBConnector, so db.DB() returns the pool.
func (p *pool) GetDBConn() (*sql.DB, error) { return p.db, nil }
