package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/connstore/connstore/repository"
)

// maxPause is the longest pause an operator may set from the dashboard.
const maxPause = 7 * 24 * time.Hour

// act runs one action, when Authorize allows it, through the admin API
// the CLI uses, and redirects back to the page it came from (303, so a
// reload does not repeat it); ?format=json answers the result instead.
func (d *dashboard) act(w http.ResponseWriter, r *http.Request) {
	action := Action(r.PathValue("action"))
	if !slices.Contains(actions, action) {
		d.fail(w, r, badf("unknown action %q", string(action)))
		return
	}
	if d.opts.Authorize == nil {
		d.fail(w, r, ErrReadOnly)
		return
	}
	if err := d.opts.Authorize(r, action); err != nil {
		d.fail(w, r, fmt.Errorf("%w: %w", errRefused, err))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, badf("form: %v", err))
		return
	}
	f, err := texts(r.PostForm, "caller", "op", "connector", "account", "for", "owner", "status", "if_status", "error")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ctx := r.Context()
	back := "/operation?" + url.Values{"caller": {f["caller"]}, "op": {f["op"]}}.Encode()
	switch action {
	case ActionRequeue:
		_, err = d.repo.RequeueOperation(ctx, repository.RequeueParams{OperationKey: repository.OperationKey{CallerDID: f["caller"], OperationID: f["op"]}})
	case ActionCancel:
		_, err = d.repo.CancelOperation(ctx, repository.CancelParams{OperationKey: repository.OperationKey{CallerDID: f["caller"], OperationID: f["op"]}})
	case ActionSetSyncStatus:
		back = "/sync?" + url.Values{"connector": {f["connector"]}}.Encode()
		if !slices.Contains(syncStatuses, f["status"]) {
			d.fail(w, r, badf("parameter status: one of idle, syncing, error"))
			return
		}
		p := repository.SetSyncStatusParams{Key: repository.ConnectorKey{ConnectorName: f["connector"], OwnerDID: f["owner"]},
			Status: f["status"]}
		if msg := f["error"]; msg != "" {
			p.Error = &msg
		}
		if f["if_status"] != "" {
			p.IfStatus = []string{f["if_status"]}
		}
		_, err = d.repo.SetSyncStatus(ctx, p)
	case ActionPauseAccount, ActionResumeAccount:
		k := repository.AccountKey{ConnectorName: f["connector"], AccountKey: f["account"]}
		back = "/accounts?" + url.Values{"connector": {f["connector"]}}.Encode()
		if action == ActionResumeAccount {
			err = d.repo.ResumeAccount(ctx, k)
			break
		}
		var dur time.Duration
		if dur, err = time.ParseDuration(f["for"]); err != nil || dur < time.Second || dur > maxPause {
			d.fail(w, r, badf("parameter for: a duration from 1s to %v, e.g. 15m", maxPause))
			return
		}
		err = d.repo.PauseAccount(ctx, k, d.repo.Now().Add(dur))
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"done":"` + string(action) + `"}` + "\n"))
		return
	}
	http.Redirect(w, r, d.opts.BasePath+back+"&done="+string(action), http.StatusSeeOther)
}
