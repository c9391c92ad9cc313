package dashboard

import (
	"errors"
	"net/http"
	"regexp"
	"time"
)

// Action names a change an operator may make from the dashboard.
type Action string

// The dashboard's actions.
const (
	ActionRequeue       Action = "requeue"
	ActionCancel        Action = "cancel"
	ActionPauseAccount  Action = "pause_account"
	ActionResumeAccount Action = "resume_account"
	// ActionSetSyncStatus changes a sync state's status (and error) by
	// the admin API's compare-and-swap, only from the status the page
	// showed: a workflow that moved it since gets 409, not an overwrite.
	ActionSetSyncStatus Action = "set_sync_status"
)

// actions are every Action, in the order the docs list them.
var actions = []Action{ActionRequeue, ActionCancel, ActionPauseAccount, ActionResumeAccount, ActionSetSyncStatus}

// ErrReadOnly is what an action answers when Options.Authorize is nil.
var ErrReadOnly = errors.New("dashboard: read-only (no Options.Authorize)")

// Options configures the dashboard.
type Options struct {
	// BasePath is the prefix the host mounts the handler under (e.g.
	// "/connstore", with http.StripPrefix of the same): the pages' links
	// and forms start with it. "" mounts at the root.
	BasePath string
	// Authorize decides whether r may take action: nil makes the dashboard
	// read-only (every action answers 403); a non-nil error refuses the
	// action with 403 and the error's text. Wire the host's own
	// authentication here (the session's user, a role).
	Authorize func(r *http.Request, action Action) error
	// Refresh is how often a page reloads itself (a meta refresh, so no
	// script is needed) unless the operator turns it off (?refresh=off);
	// 0 means 5 s, negative never.
	Refresh time.Duration
	// TrustedOrigins are origins besides the dashboard's own whose POSTs
	// are accepted (http.CrossOriginProtection's AddTrustedOrigin), e.g. a
	// reverse proxy's public origin "https://ops.example.com".
	TrustedOrigins []string
}

// MaxPageSize is the most rows a listing page shows.
const MaxPageSize = 200

// defaultPageSize is a listing's page size when none is asked for.
const defaultPageSize = 50

// basePath is what a BasePath may be: path segments of letters, digits,
// '-', '_' and '.', each after one '/'. Links and the redirect after an
// action start with it, so anything that a browser could read as another
// host ("//host", "/\host") or scheme is refused.
var basePath = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)

func (o Options) validate() error {
	if o.BasePath != "" && !basePath.MatchString(o.BasePath) {
		return errors.New("dashboard: BasePath must be path segments like /ops or /admin/connstore, with no trailing /")
	}
	return nil
}

func (o Options) refresh() time.Duration {
	if o.Refresh == 0 {
		return 5 * time.Second
	}
	return o.Refresh
}
