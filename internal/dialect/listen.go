package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrNoListen is Listen's error on a database that announces nothing.
var ErrNoListen = errors.New("this database does not announce")

// Listen holds one connection of db listening on channel and calls wake for
// each announcement whose payload is the schema of table, until ctx ends or
// the connection fails. The connection is given back marked bad: a
// listening connection (or one whose wait was cancelled) must not serve
// other statements.
func (postgres) Listen(ctx context.Context, db *sql.DB, channel, table string, wake func()) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var schema string
	err = conn.QueryRowContext(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = CAST($1 AS regclass)`, table).Scan(&schema)
	if err != nil {
		return fmt.Errorf("find %s: %w", table, err)
	}
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("driver connection %T is not pgx's", dc)
		}
		if _, err := pc.Conn().Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		for {
			n, err := pc.Conn().WaitForNotification(ctx)
			if err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			if n.Payload == schema {
				wake()
			}
		}
	})
}

// Listen is ErrNoListen: SQLite announces nothing (Listens is false).
func (sqlite) Listen(context.Context, *sql.DB, string, string, func()) error { return ErrNoListen }
