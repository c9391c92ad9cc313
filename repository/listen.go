package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/connstore/connstore/migrations"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrListenUnsupported is returned by ListenRecorded where the database
// cannot announce recorded operations (SQLite): poll instead.
var ErrListenUnsupported = errors.New("connstore: this database does not announce recorded operations")

// ListenRecorded calls wake each time a transaction that recorded
// operations into this repository's table commits, until ctx ends; it then
// returns ctx's error. It holds one connection of the pool for as long as
// it listens (PostgreSQL LISTEN on the channel of migration 0011, filtered
// to this table's schema) and closes it when it stops, so no pooled
// connection is left listening. wake runs on the listening goroutine and
// must not block. Announcements are hints, not a queue: one may stand for
// many recordings, and none is sent for a retry coming due, so a listener
// still polls.
//
// Behind PgBouncer in transaction pooling a LISTEN is not tied to the
// client's connection and no announcement arrives; such deployments poll.
func (r *Repository) ListenRecorded(ctx context.Context, wake func()) error {
	if wake == nil {
		return invalid("listen: wake is nil")
	}
	if !r.dialect.Listens() {
		return ErrListenUnsupported
	}
	sqlDB, err := r.db.DB()
	if err != nil {
		return fmt.Errorf("listen: needs a pooled handle, not a transaction: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer conn.Close()
	var schema string
	err = conn.QueryRowContext(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = 'kubun_connector_operation'::regclass`).Scan(&schema)
	if err != nil {
		return fmt.Errorf("listen: find the operation table: %w", err)
	}
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("listen: driver connection %T is not pgx's", dc)
		}
		if _, err := pc.Conn().Exec(ctx, "LISTEN "+migrations.NotifyChannel); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		for {
			n, err := pc.Conn().WaitForNotification(ctx)
			if err != nil {
				// The connection listens (and a cancelled wait leaves it
				// unusable): the pool must not hand it out again.
				return errors.Join(err, driver.ErrBadConn)
			}
			if n.Payload == schema {
				wake()
			}
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("listen: %w", err)
}
