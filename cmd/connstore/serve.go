package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/jackc/pgx/v5/pgconn"
)

// serveFlags declares serve's flags.
func serveFlags(c *cli) {
	c.fs.StringVar(&c.f.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	c.fs.BoolVar(&c.f.public, "public", false,
		"allow an address other than loopback (the dashboard has no authentication of its own)")
	c.fs.BoolVar(&c.f.actions, "actions", false,
		"allow the dashboard's actions (requeue, cancel, pause, resume, sync status) to anyone who reaches it")
	c.fs.DurationVar(&c.f.refresh, "refresh", 5*time.Second, "how often pages reload themselves (0 never)")
}

// errNotLoopback is serve's refusal of an address others can reach.
var errNotLoopback = errors.New("not a loopback address")

// serve runs the dashboard until the command is interrupted. It listens on
// loopback unless -public says otherwise, because the standalone dashboard
// has no authentication: on 127.0.0.1 only the machine's own users (an
// operator with an SSH tunnel) reach it. Without -actions it is read-only
// (Options.Authorize nil). The line it prints names the database without
// its password.
func serve(ctx context.Context, c *cli) error {
	host, _, err := net.SplitHostPort(c.f.addr)
	if err != nil {
		return fmt.Errorf("%w: -addr %q: %v", errUsage, c.f.addr, err)
	}
	if !c.f.public && !loopback(host) {
		return fmt.Errorf("%w: -addr %q: %w; pass -public to listen there", errUsage, c.f.addr, errNotLoopback)
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	o := dashboard.Options{Refresh: c.f.refresh}
	if c.f.refresh == 0 {
		o.Refresh = -1
	}
	mode := "read-only"
	if c.f.actions {
		o.Authorize = func(*http.Request, dashboard.Action) error { return nil }
		mode = "actions allowed"
	}
	h, err := dashboard.New(repo, o)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.f.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(c.stdout, "connstore dashboard on http://%s/ (%s), database %s; interrupt to stop\n",
		ln.Addr(), mode, describeDSN(c.dsn))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("stop serving: %w", err)
	}
	return nil
}

// loopback reports whether host names only this machine: "localhost" or a
// loopback IP ("" and 0.0.0.0 are every interface, so not).
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// describeDSN names the database for a log line: a PostgreSQL server by
// host, port, database and user (never its password, which is not among
// the fields it prints), a SQLite file by its path.
func describeDSN(dsn string) string {
	if !isPostgres(dsn) {
		return "SQLite file " + dsn
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "PostgreSQL (unparsable DSN)"
	}
	return fmt.Sprintf("PostgreSQL at %s:%d, database %s, user %s", pc.Host, pc.Port, pc.Database, pc.User)
}
