package dashboard

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/connstore/connstore/repository"
)

//go:embed assets
var assets embed.FS

// dashboard serves the pages.
type dashboard struct {
	repo  *repository.Repository
	opts  Options
	pages *template.Template
	log   *slog.Logger
}

// New returns the dashboard of repo as an http.Handler. Its POSTs are
// refused when cross-origin (http.CrossOriginProtection: the browser's
// Sec-Fetch-Site, or Origin against Host; chosen over a CSRF token because
// it needs no session or cookie of ours, which a handler mounted behind the
// host's middleware has no place to keep), and every response carries a
// strict Content-Security-Policy: no script at all, styles and images
// from the dashboard only, no framing.
func New(repo *repository.Repository, o Options) (http.Handler, error) {
	if repo == nil {
		return nil, errors.New("dashboard: nil repository")
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(funcs(o)).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: parse templates: %w", err)
	}
	d := &dashboard{repo: repo, opts: o, pages: pages, log: slog.Default()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.overview)
	mux.HandleFunc("GET /operations", d.operations)
	mux.HandleFunc("GET /operation", d.operation)
	mux.HandleFunc("GET /accounts", d.accounts)
	mux.HandleFunc("GET /sync", d.syncStates)
	mux.HandleFunc("POST /actions/{action}", d.act)
	mux.Handle("GET /assets/style.css", http.FileServerFS(assets))
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("dashboard: trusted origin: %w", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	return secure(cop.Handler(mux)), nil
}

// secure sets the headers every response carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "+
			"frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// page is what every page's template gets.
type page struct {
	Title   string
	Base    string
	Refresh int    // seconds; 0 for none
	Query   string // this page's query with refreshing off
	Again   string // this page's path and query without the notice
	Notice  string
	Data    any
}

// render writes data as the page's HTML, or as JSON for ?format=json.
func (d *dashboard) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(data)
		return
	}
	p := page{Title: title, Base: d.opts.BasePath, Data: data}
	if done := Action(r.URL.Query().Get("done")); slices.Contains(actions, done) {
		p.Notice = string(done)
	}
	// The page reloads, and stops reloading, without the action's notice.
	again := r.URL.Query()
	again.Del("done")
	p.Again = r.URL.Path
	if len(again) > 0 {
		p.Again += "?" + again.Encode()
	}
	again.Set("refresh", "off")
	p.Query = "?" + again.Encode()
	if every := d.opts.refresh(); every > 0 && r.URL.Query().Get("refresh") != "off" && r.Method == http.MethodGet {
		p.Refresh = int(max(every/time.Second, 1))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.pages.ExecuteTemplate(w, name, p); err != nil {
		d.log.ErrorContext(r.Context(), "connstore dashboard: render", "page", name, "err", err)
	}
}

// fail answers an error: 400 for bad input (with its message), 404, 409
// for a row in a state that refuses the action, 403 for a refused action,
// 500 (logged, no detail shown) for anything else.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var bad badRequest
	switch {
	case errors.As(err, &bad), errors.Is(err, repository.ErrInvalidInput):
		status = http.StatusBadRequest
	case errors.Is(err, repository.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, repository.ErrWrongState), errors.Is(err, repository.ErrLeaseHeld):
		status = http.StatusConflict
	case errors.Is(err, errRefused), errors.Is(err, ErrReadOnly), errors.Is(err, repository.ErrOutOfScope):
		status = http.StatusForbidden
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		d.log.ErrorContext(r.Context(), "connstore dashboard", "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, status)
}

// badRequest is a query parameter the dashboard refuses.
type badRequest struct{ msg string }

func (b badRequest) Error() string { return b.msg }

func badf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// errRefused wraps Authorize's refusals.
var errRefused = errors.New("dashboard: action refused")
