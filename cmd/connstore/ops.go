package main

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

func opsCountsFlags(c *cli) {
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "only this connector")
	c.fs.Var((*partFlag)(&c.f.owner), "owner", "only this owner DID")
	c.fs.StringVar(&c.f.states, "states", "", "comma-separated states (default attempted,dead,reconcile_only)")
	c.fs.DurationVar(&c.f.overdueAfter, "overdue-after", repository.DefaultOverdueAfter, "due and unclaimed this long counts as overdue")
}

// countView is one row of "ops counts" as JSON.
type countView struct {
	Connector        string  `json:"connector"`
	Owner            string  `json:"owner"`
	State            string  `json:"state"`
	Count            int64   `json:"count"`
	Due              int64   `json:"due"`
	Leased           int64   `json:"leased"`
	Overdue          int64   `json:"overdue"`
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
}

func opsCounts(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	counts, err := repo.CountOperations(ctx, repository.OperationCountsParams{ConnectorName: c.f.connector,
		OwnerDID: c.f.owner, States: splitList(c.f.states), OverdueAfter: c.f.overdueAfter})
	if err != nil {
		return err
	}
	views := make([]countView, len(counts))
	t := table{v: views, header: []string{"CONNECTOR", "OWNER", "STATE", "COUNT", "DUE", "LEASED", "OVERDUE", "OLDEST DUE"}}
	for i, n := range counts {
		views[i] = countView{n.ConnectorName, n.OwnerDID, n.State, n.Count, n.Due, n.Leased, n.Overdue, n.OldestDue.Seconds()}
		t.rows = append(t.rows, []string{n.ConnectorName, n.OwnerDID, n.State, itoa(n.Count), itoa(n.Due),
			itoa(n.Leased), itoa(n.Overdue), n.OldestDue.Round(time.Second).String()})
	}
	return c.print(t)
}

func opsListFlags(c *cli) {
	c.fs.StringVar(&c.f.state, "state", "", "the state listed: attempted, dead, reconcile_only or committed")
	c.fs.BoolVar(&c.f.overdue, "overdue", false, "only attempted operations due and unclaimed for over -overdue-after")
	c.fs.DurationVar(&c.f.overdueAfter, "overdue-after", repository.DefaultOverdueAfter, "see -overdue")
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "only this connector")
	c.fs.Var((*partFlag)(&c.f.owner), "owner", "only this owner DID")
	c.fs.StringVar(&c.f.after, "after", "", "resume after CALLER/OPERATION (printed under a full page)")
	c.fs.Int64Var(&c.f.afterDue, "after-due", 0, "with -overdue -after: the due time (epoch ms) printed with it")
	c.fs.IntVar(&c.f.limit, "limit", 50, "page size")
}

// opView is one operation as JSON.
type opView struct {
	// Key is the operation's key as the table prints it and every command
	// that takes a key reads it.
	Key            string      `json:"key"`
	Caller         string      `json:"caller_did"`
	Operation      string      `json:"operation_id"`
	Connector      string      `json:"connector"`
	Owner          string      `json:"owner"`
	Model          string      `json:"model"`
	Op             string      `json:"op"`
	State          string      `json:"state"`
	Attempts       int64       `json:"attempts"`
	NextAttemptAt  *int64      `json:"next_attempt_at"`
	LastKind       *string     `json:"last_kind"`
	LastHTTPStatus *int64      `json:"last_http_status"`
	DocumentID     *string     `json:"document_id"`
	LeaseExpiresAt *int64      `json:"lease_expires_at"`
	DueAt          int64       `json:"due_at"`
	Result         models.JSON `json:"result_entity,omitempty"`
	CreatedAt      int64       `json:"created_at"`
	UpdatedAt      int64       `json:"updated_at"`
}

func viewOf(op *models.Operation) opView {
	return opView{opKeyText(op.CallerDID, op.OperationID), op.CallerDID, op.OperationID, op.ConnectorName, op.OwnerDID, op.Model, op.Op, op.State, op.Attempts,
		op.NextAttemptAt, op.LastKind, op.LastHTTPStatus, op.DocumentID, op.LeaseExpiresAt, repository.CursorAfter(op).DueAt,
		op.ResultEntity, op.CreatedAt, op.UpdatedAt}
}

var opHeader = []string{"CALLER/OPERATION", "CONNECTOR", "OWNER", "STATE", "ATTEMPTS", "LAST KIND", "HTTP", "NEXT ATTEMPT", "UPDATED"}

func opRow(op *models.Operation) []string {
	updated := op.UpdatedAt
	return []string{opKeyText(op.CallerDID, op.OperationID), quotePart(op.ConnectorName, false), quotePart(op.OwnerDID, false),
		op.State, itoa(op.Attempts), cell(str(op.LastKind)), num(op.LastHTTPStatus), millis(op.NextAttemptAt), millis(&updated)}
}

// opKeyText is an operation's key as the CLI prints it (keys.go).
func opKeyText(caller, id string) string { return formatKey(caller, id) }

// opKeyArg reads an operation's key as the CLI prints it.
func opKeyArg(s string) (repository.OperationKey, error) {
	caller, id, err := parseKey(s, "CALLER/OPERATION")
	if err == nil && id == "" {
		err = fmt.Errorf("%w: %q is not CALLER/OPERATION: the operation id is empty", errUsage, s)
	}
	return repository.OperationKey{CallerDID: caller, OperationID: id}, err
}

func opsList(ctx context.Context, c *cli) error {
	p := repository.ListByStateParams{State: c.f.state, Overdue: c.f.overdue, OverdueAfter: c.f.overdueAfter,
		ConnectorName: c.f.connector, OwnerDID: c.f.owner, Limit: c.f.limit}
	if c.f.after != "" {
		after, err := opKeyArg(c.f.after)
		if err != nil {
			return fmt.Errorf("-after: %w", err)
		}
		// The overdue listing pages by due time as well: a row's due time
		// moves when it is claimed, so it must come from the page that
		// showed the row, not from the row now.
		if c.f.overdue && c.f.afterDue == 0 {
			return fmt.Errorf("%w: -overdue -after needs -after-due, printed with the previous page", errUsage)
		}
		p.After = &repository.ListCursor{OperationKey: after, DueAt: c.f.afterDue}
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	ops, err := repo.ListOperationsByState(ctx, p)
	if err != nil {
		return err
	}
	views := make([]opView, len(ops))
	t := table{v: views, header: opHeader}
	for i := range ops {
		views[i] = viewOf(&ops[i])
		t.rows = append(t.rows, opRow(&ops[i]))
	}
	if err := c.print(t); err != nil || c.json || len(ops) < p.Limit {
		return err
	}
	// A full page: say how to get the next one (JSON carries due_at).
	last := repository.CursorAfter(&ops[len(ops)-1])
	next := "next page: -after " + shellQuote(opKeyText(last.CallerDID, last.OperationID))
	if p.Overdue {
		next += fmt.Sprintf(" -after-due %d", last.DueAt)
	}
	_, err = fmt.Fprintln(c.stdout, next)
	return err
}

func opsRequeueFlags(c *cli) {
	c.fs.BoolVar(&c.f.resetAttempts, "reset-attempts", false, "start the attempt count again at zero")
}

func opsRequeue(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	k, err := opKeyArg(c.positional[0])
	if err != nil {
		return err
	}
	op, err := repo.RequeueOperation(ctx, repository.RequeueParams{ResetAttempts: c.f.resetAttempts, OperationKey: k})
	if err != nil {
		return err
	}
	return c.message(viewOf(op), fmt.Sprintf("requeued %s: attempted, due now, %d attempts so far",
		opKeyText(op.CallerDID, op.OperationID), op.Attempts))
}

func opsCancelFlags(c *cli) {
	c.fs.BoolVar(&c.f.force, "force", false, "cancel even under a live lease (the holder's later writes are refused)")
}

func opsCancel(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	k, err := opKeyArg(c.positional[0])
	if err != nil {
		return err
	}
	op, err := repo.CancelOperation(ctx, repository.CancelParams{Force: c.f.force, OperationKey: k})
	if err != nil {
		return err
	}
	return c.message(viewOf(op), fmt.Sprintf("cancelled %s: dead, last kind %s", opKeyText(op.CallerDID, op.OperationID), repository.CancelledKind))
}

// attemptView is one answer of an operation's history as JSON.
type attemptView struct {
	At         string  `json:"at"`
	Attempts   int64   `json:"attempts"`
	State      string  `json:"state"`
	Kind       *string `json:"kind"`
	HTTPStatus *int64  `json:"http_status"`
	Message    *string `json:"message"`
}

// showView is "ops show" as JSON: the operation and its history.
type showView struct {
	opView
	LastMessage *string       `json:"last_message"`
	History     []attemptView `json:"history"`
}

// opsShow prints one operation, every column, and its attempt history
// (newest first).
func opsShow(ctx context.Context, c *cli) error {
	k, err := opKeyArg(c.positional[0])
	if err != nil {
		return err
	}
	repo, err := c.repo()
	if err != nil {
		return err
	}
	op, err := repo.GetOperation(ctx, k)
	if err != nil {
		return err
	}
	hist, err := repo.OperationAttempts(ctx, k)
	if err != nil {
		return err
	}
	v := showView{opView: viewOf(op), LastMessage: op.LastMessage, History: make([]attemptView, len(hist))}
	for i, h := range hist {
		v.History[i] = attemptView{millis(&h.At), h.Attempts, h.State, h.Kind, h.HTTPStatus, h.Message}
	}
	if c.json {
		return c.print(table{v: v})
	}
	fields := table{header: []string{"FIELD", "VALUE"}, rows: [][]string{
		{"key", v.Key}, {"connector", quotePart(op.ConnectorName, false)}, {"owner", quotePart(op.OwnerDID, false)},
		{"account", quotePart(op.AccountKey, false)}, {"model", cell(op.Model)}, {"op", cell(op.Op)},
		{"state", op.State}, {"attempts", itoa(op.Attempts)}, {"next attempt", millis(op.NextAttemptAt)},
		{"lease until", millis(op.LeaseExpiresAt)}, {"last kind", cell(str(op.LastKind))},
		{"last HTTP status", num(op.LastHTTPStatus)}, {"last message", cell(str(op.LastMessage))},
		{"last answer at", millis(op.LastAnswerAt)}, {"document", cell(str(op.DocumentID))},
		{"created", millis(&op.CreatedAt)}, {"updated", millis(&op.UpdatedAt)},
	}}
	if err := c.print(fields); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(c.stdout); err != nil {
		return err
	}
	if len(hist) == 0 {
		_, err = fmt.Fprintln(c.stdout, "no answers recorded")
		return err
	}
	t := table{header: []string{"AT", "ATTEMPTS", "STATE", "KIND", "HTTP", "MESSAGE"}}
	for _, h := range v.History {
		t.rows = append(t.rows, []string{h.At, itoa(h.Attempts), h.State, cell(str(h.Kind)), num(h.HTTPStatus), cell(str(h.Message))})
	}
	return c.print(t)
}
