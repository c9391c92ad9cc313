// Command connstore is the operator's tool for a connstore database: it
// migrates the schema, shows and repairs the operation journal, changes
// sync statuses safely and runs retention and pending-auth purges.
//
//	go run github.com/connstore/connstore/cmd/connstore -dsn app.db ops counts
//	CONNSTORE_DSN='postgres://app@db:5432/app' connstore ops list -state dead
//
// The database is named by -dsn or CONNSTORE_DSN: a postgres:// (or
// postgresql://) URL or key=value pairs open PostgreSQL, anything else is a
// SQLite file path. Output is a table for people, or JSON with -json. The
// exit status is 0 on success, 1 when the command failed (one line on
// stderr says why) and 2 for a usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// errUsage marks a usage error: exit status 2 and the usage text.
var errUsage = errors.New("usage")

// run is the whole command, with its environment passed in so tests can
// call it directly as well as through the built binary.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	err := dispatch(ctx, args, stdout, getenv)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "connstore: %v\n\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "connstore: %v\n", oneLine(err))
		return 1
	}
}

const usage = `usage: connstore [-dsn DSN] [-json] COMMAND [flags]

commands:
  migrate up                      apply pending migrations
  migrate status                  list migrations and whether each has run
  ops counts                      queue depth per connector, owner and state
  ops list -state S               page through operations in one state
  ops show CALLER/OPERATION       one operation, every column, and its attempt history
  ops requeue CALLER/OPERATION    drive a dead or reconcile-only operation again
  ops cancel CALLER/OPERATION     give up an attempted operation
  ops requeue-matching            requeue the dead operations a filter matches (-dry-run counts)
  ops cancel-matching             cancel the attempted operations a filter matches, never under a live lease
  sync list -connector C          list a connector's sync states
  sync set-status                 change a sync state's status by compare-and-swap
  retention run                   collect finished operations the keep rules allow
  auth purge                      delete expired pending authorizations
  accounts list                   accounts under flow control: limits, in flight, paused until
  accounts set CONNECTOR/ACCOUNT  set an account's limits (CONNECTOR/* for the connector's own)
  accounts pause CONNECTOR/ACCOUNT -for D   pause an account (a provider's Retry-After)
  accounts resume CONNECTOR/ACCOUNT         end an account's pause now
  serve [-addr 127.0.0.1:8080]    run the web dashboard (read-only unless -actions)

Every command takes -dsn (default $CONNSTORE_DSN) and -json; "connstore
COMMAND -h" lists a command's own flags. A key (CALLER/OPERATION,
CONNECTOR/ACCOUNT) is read as the tables print it: each part as it is, or
as a Go double-quoted string when it holds white space, control characters
or (the first part) a slash; in a shell, put it in single quotes.
`
