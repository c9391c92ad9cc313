package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServe runs "connstore serve" as an operator would, on both
// databases: it prints where it listens (never the DSN's password), the
// dashboard answers there, read-only unless -actions, and an interrupt
// stops it with status 0.
func TestServe(t *testing.T) {
	forEachDB(t, func(t *testing.T, d database) {
		record(t, d.repo, "op-1")
		dsn, secret := d.dsn, ""
		if isPostgres(dsn) {
			// The test server trusts loopback, so a password in the DSN
			// is accepted and ignored: it must not reach the log line.
			u, err := url.Parse(dsn)
			require.NoError(t, err)
			secret = "pw-never-shown-42"
			u.User = url.UserPassword(u.User.Username(), secret)
			dsn = u.String()
		}
		for _, tc := range []struct {
			name     string
			args     []string
			postCode int
		}{
			{"read-only", nil, http.StatusForbidden},
			{"actions", []string{"-actions"}, http.StatusSeeOther},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cmd := exec.CommandContext(t.Context(), binary, append([]string{"-dsn", dsn, "serve", "-addr", "127.0.0.1:0"}, tc.args...)...)
				// The process writes stderr from exec's copying goroutine
				// while the test reads it for messages: a locked buffer.
				var stderr lockedBuffer
				cmd.Stderr = &stderr
				out, err := cmd.StdoutPipe()
				require.NoError(t, err)
				require.NoError(t, cmd.Start())
				line, err := bufio.NewReader(out).ReadString('\n')
				require.NoError(t, err, "stderr: %s", stderr.String())
				if secret != "" {
					require.NotContains(t, line, secret)
				}
				addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
				require.NotEmpty(t, addr, line)

				res, err := http.Get(addr + "operations?state=attempted")
				require.NoError(t, err)
				body, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				_ = res.Body.Close()
				require.Equal(t, http.StatusOK, res.StatusCode)
				require.Contains(t, string(body), "op-1")

				// A same-origin requeue of an attempted row: refused (403)
				// when read-only, let through to the admin call (which
				// refuses the state, 409, shown after the redirect) with
				// -actions.
				req, err := http.NewRequest(http.MethodPost, addr+"actions/requeue",
					strings.NewReader(url.Values{"caller": {"did:key:caller"}, "op": {"op-1"}}.Encode()))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				client := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				res, err = client.Do(req)
				require.NoError(t, err)
				_ = res.Body.Close()
				if tc.postCode == http.StatusForbidden {
					require.Equal(t, http.StatusForbidden, res.StatusCode)
				} else {
					require.Equal(t, http.StatusConflict, res.StatusCode, "an attempted row is not requeued")
				}

				require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					require.NoError(t, err, "stderr: %s", stderr.String())
				case <-time.After(10 * time.Second):
					t.Fatal("serve did not stop on an interrupt")
				}
				if secret != "" {
					require.NotContains(t, stderr.String(), secret)
				}
			})
		}
	})
}

// TestServeRefusesOtherAddresses: an address others can reach needs
// -public (usage error, status 2, nothing listened on).
func TestServeRefusesOtherAddresses(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/s.db"
	ok(t, path, "migrate", "up")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		fails(t, 2, "pass -public", nil, "-dsn", path, "serve", "-addr", addr)
	}
	fails(t, 2, "-addr", nil, "-dsn", path, "serve", "-addr", "nonsense")
	_ = os.Remove(path)
}

// lockedBuffer is a bytes.Buffer safe for one writer and readers at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p under the lock.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
