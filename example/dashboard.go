package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/repository"
)

// serveDashboard serves the operator's dashboard of repo on addr while the
// example runs, and prints where. Only a loopback address is accepted: the
// example allows every action (requeue, cancel, pause) to whoever reaches
// it, which is safe only on the machine's own interface.
func serveDashboard(ctx context.Context, out io.Writer, repo *repository.Repository, addr string) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-dashboard %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-dashboard %q: the example serves its dashboard on loopback only", addr)
	}
	h, err := dashboard.New(repo, dashboard.Options{
		Authorize: func(*http.Request, dashboard.Action) error { return nil },
	})
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(out, "Dashboard: http://%s/ (open it while the example runs; -serve keeps it open after)\n", ln.Addr())
	return func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}, nil
}
