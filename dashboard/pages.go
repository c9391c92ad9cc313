package dashboard

import (
	"net/http"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// overviewData is the overview page: the queues by connector and state,
// their owners summed (the states an operator watches: attempted, dead,
// reconcile-only; committed rows are the journal's bulk and are counted
// only on demand), and the accounts paused now.
type overviewData struct {
	Now    time.Time                  `json:"now"`
	Queues []queue                    `json:"queues"`
	More   int                        `json:"more_queues,omitempty"`
	Paused []repository.AccountStatus `json:"paused_accounts"`
	// Tables is the rest: sync states by status, watches due, retention's
	// rows to judge, sweeps' checkpoints.
	Tables *repository.Overview `json:"tables"`
}

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	queues, err := d.repo.CountOperations(r.Context(), repository.OperationCountsParams{})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	paused, err := d.repo.ListAccounts(r.Context(), repository.ListAccountsParams{PausedOnly: true, Limit: MaxPageSize})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	tables, err := d.repo.ReadOverview(r.Context(), repository.OverviewParams{})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rows, more := queuesOf(queues)
	d.render(w, r, "overview", "Overview", overviewData{Now: d.repo.Now(), Queues: rows, More: more, Paused: paused, Tables: tables})
}

// operationsData is a page of the operations listing and the filters it
// was asked with; Next is the next page's query (nil on the last page).
type operationsData struct {
	Now        time.Time         `json:"now"`
	State      string            `json:"state"`
	Connector  string            `json:"connector,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	Account    string            `json:"account,omitempty"`
	Caller     string            `json:"caller,omitempty"`
	Document   string            `json:"document,omitempty"`
	Limit      int               `json:"limit"`
	Operations []opView          `json:"operations"`
	Next       map[string]string `json:"next,omitempty"`
}

// operations lists operations by state (or overdue), narrowed by
// connector, owner, account, caller and document, paged by the
// repository's keyset cursor (never OFFSET). A narrowed page filters the
// state's rows as it reads them in order, so it costs at most the rows in
// that state: the queue's states (attempted, dead, reconcile-only) are
// the queue's size, but the committed rows are the journal, so committed
// operations are narrowed by connector and owner only (400 otherwise).
func (d *dashboard) operations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st, err := state(q)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	n, err := limit(q)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f, err := texts(q, "connector", "owner", "account", "caller", "document", "after_caller", "after_op")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if st == models.OperationCommitted && (f["account"] != "" || f["caller"] != "" || f["document"] != "") {
		d.fail(w, r, badf("committed operations are narrowed by connector and owner only: a filter by account, caller "+
			"or document would read the whole journal"))
		return
	}
	seq, err := integer(q, "after_seq")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	dueAt, err := integer(q, "after_due")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := repository.ListByStateParams{State: st, ConnectorName: f["connector"], OwnerDID: f["owner"],
		AccountKey: f["account"], CallerDID: f["caller"], DocumentID: f["document"], Limit: n}
	if st == "overdue" {
		p.State, p.Overdue = models.OperationAttempted, true
	}
	if f["after_caller"] != "" || f["after_op"] != "" {
		p.After = &repository.ListCursor{OperationKey: repository.OperationKey{CallerDID: f["after_caller"], OperationID: f["after_op"]},
			Seq: seq, DueAt: dueAt}
	}
	ops, err := d.repo.ListOperationsByState(r.Context(), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := operationsData{Now: d.repo.Now(), State: st, Connector: f["connector"], Owner: f["owner"], Account: f["account"],
		Caller: f["caller"], Document: f["document"], Limit: n, Operations: viewsOf(ops)}
	if len(ops) == n {
		c := repository.CursorAfter(&ops[len(ops)-1])
		data.Next = map[string]string{"state": st, "connector": f["connector"], "owner": f["owner"],
			"account": f["account"], "caller": f["caller"], "document": f["document"],
			"after_caller": c.CallerDID, "after_op": c.OperationID, "after_seq": itoa(c.Seq), "after_due": itoa(c.DueAt), "limit": itoa(int64(n))}
	}
	d.render(w, r, "operations", "Operations", data)
}

// operationData is one operation, with what holds it where it is.
type operationData struct {
	Now       time.Time `json:"now"`
	Operation opView    `json:"operation"`
	// Why says, in words, why the operation is where it is.
	Why []string `json:"why"`
	// CanRequeue and CanCancel say which actions its state allows.
	CanRequeue bool `json:"can_requeue"`
	CanCancel  bool `json:"can_cancel"`
	// History is its answers, newest first (OperationAttempts).
	History []models.OperationAttempt `json:"history"`
}

func (d *dashboard) operation(w http.ResponseWriter, r *http.Request) {
	f, err := texts(r.URL.Query(), "caller", "op")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if f["caller"] == "" || f["op"] == "" {
		d.fail(w, r, badf("parameters caller and op are required"))
		return
	}
	op, err := d.repo.GetOperation(r.Context(), repository.OperationKey{CallerDID: f["caller"], OperationID: f["op"]})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	hist, err := d.repo.OperationAttempts(r.Context(), repository.OperationKey{CallerDID: op.CallerDID, OperationID: op.OperationID})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	now := d.repo.Now()
	d.render(w, r, "operation", "Operation", operationData{Now: now, Operation: viewOf(*op), Why: explain(op, now),
		CanRequeue: op.State == models.OperationDead || op.State == models.OperationReconcileOnly,
		CanCancel:  op.State == models.OperationAttempted, History: hist})
}

// accountsData is a page of the accounts under flow control.
type accountsData struct {
	Now       time.Time                  `json:"now"`
	Connector string                     `json:"connector,omitempty"`
	Paused    bool                       `json:"paused_only"`
	Accounts  []repository.AccountStatus `json:"accounts"`
	Next      map[string]string          `json:"next,omitempty"`
}

func (d *dashboard) accounts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := limit(q)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f, err := texts(q, "connector", "after_connector", "after_account", "paused")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := repository.ListAccountsParams{ConnectorName: f["connector"], PausedOnly: f["paused"] == "1", Limit: n}
	if f["after_connector"] != "" {
		p.After = &repository.AccountKey{ConnectorName: f["after_connector"], AccountKey: f["after_account"]}
	}
	list, err := d.repo.ListAccounts(r.Context(), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := accountsData{Now: d.repo.Now(), Connector: f["connector"], Paused: p.PausedOnly, Accounts: list}
	if len(list) == n {
		last := list[len(list)-1]
		data.Next = map[string]string{"connector": f["connector"], "paused": f["paused"], "after_connector": last.ConnectorName,
			"after_account": last.AccountKey.AccountKey, "limit": itoa(int64(n))}
	}
	d.render(w, r, "accounts", "Accounts", data)
}
