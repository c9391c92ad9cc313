package repository

import (
	"database/sql"
	"fmt"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// updateOperations runs q as an UPDATE of the operations it selects to set,
// returning every column of the rows it changed.
//
// The statement is gorm's: built by gorm from q (its conditions, the
// caller's scopes, the plugin's version bump) in a dry run, then run as that
// text on q's connection (its pool, transaction and context; a resolver
// sends an UPDATE to the primary), so it is the statement gorm itself would
// run; gorm callbacks on the update chain see it as a dry run (db.DryRun),
// and it runs through the raw-statement chain. Only the scan differs: gorm maps each returned column to its field by
// reflection through pooled values, which was the largest part of the
// worker pool's own CPU per operation (a claim and a commit each return the
// row); scanOperations reads the columns straight into the fields, in half
// the time (BenchmarkScanOperations).
func (r *Repository) updateOperations(q *gorm.DB, set map[string]any) ([]models.Operation, error) {
	// An empty slice as the model: the plugin bumps the version of every
	// row the statement changes and guards none of them by a loaded version
	// (the statement's own conditions are the guard). The dry run logs
	// nothing: the caller's logger sees the statement once, when it runs.
	built := q.Session(&gorm.Session{DryRun: true, Logger: logger.Discard}).Model(&[]models.Operation{}).
		Clauses(r.returnOps).Updates(set)
	if built.Error != nil {
		return nil, built.Error
	}
	rows, err := q.Session(&gorm.Session{NewDB: true}).Raw(built.Statement.SQL.String(), built.Statement.Vars...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return r.ops.scan(rows)
}

// operationScanner reads operation rows whose columns are returnOps', in
// that order.
type operationScanner struct {
	// dests are the scan destinations of each column, in returnOps order.
	dests []func(*operationRow) any
}

// operationRow is one row being scanned: the operation, and the nullable
// columns read first as sql.Null values (a scan into a pointer field goes
// through reflection and an allocation even for NULL).
type operationRow struct {
	op                                                            models.Operation
	sourceID, etag, documentID, lastKind, incarnation, lease, end sql.NullString
	nextAttempt, httpStatus, leaseExpires, hold                   sql.NullInt64
}

// operationColumns are the scan destinations of every operation column.
var operationColumns = map[string]func(*operationRow) any{
	"caller_did":             func(s *operationRow) any { return &s.op.CallerDID },
	"operation_id":           func(s *operationRow) any { return &s.op.OperationID },
	"node_key":               func(s *operationRow) any { return &s.op.NodeKey },
	"owner_did":              func(s *operationRow) any { return &s.op.OwnerDID },
	"connector_name":         func(s *operationRow) any { return &s.op.ConnectorName },
	"model":                  func(s *operationRow) any { return &s.op.Model },
	"op":                     func(s *operationRow) any { return &s.op.Op },
	"account_key":            func(s *operationRow) any { return &s.op.AccountKey },
	"target":                 func(s *operationRow) any { return &s.op.Target },
	"source_id":              func(s *operationRow) any { return &s.sourceID },
	"deterministic_event_id": func(s *operationRow) any { return &s.op.DeterministicEventID },
	"payload_hash":           func(s *operationRow) any { return &s.op.PayloadHash },
	"reissue_intent":         func(s *operationRow) any { return &s.op.ReissueIntent },
	"provider_etag":          func(s *operationRow) any { return &s.etag },
	"document_id":            func(s *operationRow) any { return &s.documentID },
	"result_entity":          func(s *operationRow) any { return &s.op.ResultEntity },
	"state":                  func(s *operationRow) any { return &s.op.State },
	"attempts":               func(s *operationRow) any { return &s.op.Attempts },
	"next_attempt_at":        func(s *operationRow) any { return &s.nextAttempt },
	"last_kind":              func(s *operationRow) any { return &s.lastKind },
	"last_http_status":       func(s *operationRow) any { return &s.httpStatus },
	"version":                func(s *operationRow) any { return &s.op.Version },
	"incarnation":            func(s *operationRow) any { return &s.incarnation },
	"lease_token":            func(s *operationRow) any { return &s.lease },
	"lease_expires_at":       func(s *operationRow) any { return &s.leaseExpires },
	"ended_lease_token":      func(s *operationRow) any { return &s.end },
	"retention_hold":         func(s *operationRow) any { return &s.hold },
	"created_at":             func(s *operationRow) any { return &s.op.CreatedAt },
	"updated_at":             func(s *operationRow) any { return &s.op.UpdatedAt },
}

// newOperationScanner orders the destinations by ret's columns; a column
// without one (a field added to models.Operation and not here) is an error
// from New, never a silently dropped value.
func newOperationScanner(ret clause.Returning) (operationScanner, error) {
	s := operationScanner{dests: make([]func(*operationRow) any, len(ret.Columns))}
	for i, c := range ret.Columns {
		d, ok := operationColumns[c.Name]
		if !ok {
			return operationScanner{}, fmt.Errorf("connstore: operation column %q has no scan destination", c.Name)
		}
		s.dests[i] = d
	}
	return s, nil
}

// scan reads every row of rows.
func (s operationScanner) scan(rows *sql.Rows) ([]models.Operation, error) {
	var out []models.Operation
	var row operationRow
	vals := make([]any, len(s.dests))
	for i, d := range s.dests {
		vals[i] = d(&row)
	}
	for rows.Next() {
		row = operationRow{}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		op := row.op
		op.SourceID, op.ProviderEtag, op.DocumentID = text(row.sourceID), text(row.etag), text(row.documentID)
		op.LastKind, op.Incarnation = text(row.lastKind), text(row.incarnation)
		op.LeaseToken, op.EndedLeaseToken = text(row.lease), text(row.end)
		op.NextAttemptAt, op.LastHTTPStatus = number(row.nextAttempt), number(row.httpStatus)
		op.LeaseExpiresAt, op.RetentionHold = number(row.leaseExpires), number(row.hold)
		out = append(out, op)
	}
	return out, rows.Err()
}

func text(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

func number(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}
