package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/connstore/connstore/migrations"
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
	err = r.dialect.Listen(ctx, sqlDB, migrations.NotifyChannel, "kubun_connector_operation", wake)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("listen: %w", err)
}
