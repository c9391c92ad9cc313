package dashboard

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
)

// opView is an operation as the JSON twins show it: every column an
// operator reads, never the lease tokens (a live one is the holder's
// credential to finish the operation) or the lock's incarnation.
type opView struct {
	CallerDID      string          `json:"caller_did"`
	OperationID    string          `json:"operation_id"`
	Seq            int64           `json:"seq"`
	OwnerDID       string          `json:"owner_did"`
	ConnectorName  string          `json:"connector_name"`
	AccountKey     string          `json:"account_key"`
	Model          string          `json:"model"`
	Op             string          `json:"op"`
	Target         string          `json:"target"`
	NodeKey        string          `json:"node_key"`
	SourceID       *string         `json:"source_id,omitempty"`
	DocumentID     *string         `json:"document_id,omitempty"`
	State          string          `json:"state"`
	Attempts       int64           `json:"attempts"`
	NextAttemptAt  *int64          `json:"next_attempt_at,omitempty"`
	LastKind       *string         `json:"last_kind,omitempty"`
	LastHTTPStatus *int64          `json:"last_http_status,omitempty"`
	LastMessage    *string         `json:"last_message,omitempty"`
	LastAnswerAt   *int64          `json:"last_answer_at,omitempty"`
	Leased         bool            `json:"leased"`
	LeaseExpiresAt *int64          `json:"lease_expires_at,omitempty"`
	Weight         int64           `json:"weight"`
	Flow           bool            `json:"flow"`
	ReissueIntent  json.RawMessage `json:"reissue_intent,omitempty"`
	CreatedAt      int64           `json:"created_at"`
	UpdatedAt      int64           `json:"updated_at"`
}

func viewOf(op models.Operation) opView {
	v := opView{CallerDID: op.CallerDID, OperationID: op.OperationID, Seq: op.Seq, OwnerDID: op.OwnerDID,
		ConnectorName: op.ConnectorName, AccountKey: op.AccountKey, Model: op.Model, Op: op.Op, Target: op.Target,
		NodeKey: op.NodeKey, SourceID: op.SourceID, DocumentID: op.DocumentID, State: op.State, Attempts: op.Attempts,
		NextAttemptAt: op.NextAttemptAt, LastKind: op.LastKind, LastHTTPStatus: op.LastHTTPStatus,
		LastMessage: op.LastMessage, LastAnswerAt: op.LastAnswerAt, Leased: op.LeaseToken != nil, LeaseExpiresAt: op.LeaseExpiresAt, Weight: op.Weight, Flow: op.Flow,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
	if json.Valid(op.ReissueIntent) {
		v.ReissueIntent = json.RawMessage(op.ReissueIntent)
	}
	return v
}

func viewsOf(ops []models.Operation) []opView {
	out := make([]opView, len(ops))
	for i, op := range ops {
		out[i] = viewOf(op)
	}
	return out
}

// queue is one connector's operations in one state, its owners summed:
// the overview's row (a row per owner would grow with the owners).
type queue struct {
	ConnectorName string        `json:"connector_name"`
	State         string        `json:"state"`
	Owners        int           `json:"owners"`
	Count         int64         `json:"count"`
	Due           int64         `json:"due"`
	Leased        int64         `json:"leased"`
	Overdue       int64         `json:"overdue"`
	OldestDue     time.Duration `json:"oldest_due_ns"`
}

// queuesOf sums the counts per connector and state, in that order, and
// keeps at most MaxPageSize of them.
func queuesOf(counts []repository.OperationCount) (rows []queue, more int) {
	index := map[[2]string]int{}
	for _, c := range counts {
		k := [2]string{c.ConnectorName, c.State}
		i, ok := index[k]
		if !ok {
			i = len(rows)
			index[k] = i
			rows = append(rows, queue{ConnectorName: c.ConnectorName, State: c.State})
		}
		q := &rows[i]
		q.Owners++
		q.Count += c.Count
		q.Due += c.Due
		q.Leased += c.Leased
		q.Overdue += c.Overdue
		q.OldestDue = max(q.OldestDue, c.OldestDue)
	}
	slices.SortFunc(rows, func(a, b queue) int {
		return cmp.Or(strings.Compare(a.ConnectorName, b.ConnectorName), strings.Compare(a.State, b.State))
	})
	if len(rows) > MaxPageSize {
		return rows[:MaxPageSize], len(rows) - MaxPageSize
	}
	return rows, 0
}
