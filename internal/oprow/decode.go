// Package oprow decodes kubun_connector_operation rows into
// models.Operation without reflection: the one way the repository reads
// operation rows, on every path (claims, fenced writes, gets, listings,
// the due sweep), so that there is no second decoder to drift from it.
//
// gorm's scan of a ~30-column operation row (a value pool per column,
// reflective conversion, reflective set) was most of a claim's and a
// commit's CPU in the process (BENCHMARKS.md, the breakdown); the rows
// are read here into plain values (database/sql's cheapest conversion,
// into an interface) and set through a table of typed setters, one per
// column, found once per statement by the result's column names.
package oprow

import (
	"database/sql"
	"fmt"
	"strconv"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
)

// setter stores one column's value, as the driver returned it, into op.
type setter func(op *models.Operation, v any) error

// Columns are the operation table's columns in models.Operation's field
// order, each with its setter; TestColumnsMatchTheModel fails when the model
// gains, loses or reorders a column this list does not.
var columns = []struct {
	name string
	set  setter
}{
	{"caller_did", text(func(o *models.Operation) *string { return &o.CallerDID })},
	{"operation_id", text(func(o *models.Operation) *string { return &o.OperationID })},
	{"node_key", text(func(o *models.Operation) *string { return &o.NodeKey })},
	{"owner_did", text(func(o *models.Operation) *string { return &o.OwnerDID })},
	{"connector_name", text(func(o *models.Operation) *string { return &o.ConnectorName })},
	{"model", text(func(o *models.Operation) *string { return &o.Model })},
	{"op", text(func(o *models.Operation) *string { return &o.Op })},
	{"account_key", text(func(o *models.Operation) *string { return &o.AccountKey })},
	{"target", text(func(o *models.Operation) *string { return &o.Target })},
	{"source_id", optText(func(o *models.Operation) **string { return &o.SourceID })},
	{"deterministic_event_id", text(func(o *models.Operation) *string { return &o.DeterministicEventID })},
	{"payload_hash", text(func(o *models.Operation) *string { return &o.PayloadHash })},
	{"reissue_intent", jsonCol(func(o *models.Operation) *models.JSON { return &o.ReissueIntent })},
	{"provider_etag", optText(func(o *models.Operation) **string { return &o.ProviderEtag })},
	{"document_id", optText(func(o *models.Operation) **string { return &o.DocumentID })},
	{"result_entity", jsonCol(func(o *models.Operation) *models.JSON { return &o.ResultEntity })},
	{"state", text(func(o *models.Operation) *string { return &o.State })},
	{"attempts", integer(func(o *models.Operation) *int64 { return &o.Attempts })},
	{"next_attempt_at", optInteger(func(o *models.Operation) **int64 { return &o.NextAttemptAt })},
	{"last_kind", optText(func(o *models.Operation) **string { return &o.LastKind })},
	{"last_http_status", optInteger(func(o *models.Operation) **int64 { return &o.LastHTTPStatus })},
	{"last_message", optText(func(o *models.Operation) **string { return &o.LastMessage })},
	{"last_answer_at", optInteger(func(o *models.Operation) **int64 { return &o.LastAnswerAt })},
	{"version", integer(func(o *models.Operation) *int64 { return &o.Version })},
	{"incarnation", optText(func(o *models.Operation) **string { return &o.Incarnation })},
	{"lease_token", optText(func(o *models.Operation) **string { return &o.LeaseToken })},
	{"lease_expires_at", optInteger(func(o *models.Operation) **int64 { return &o.LeaseExpiresAt })},
	{"ended_lease_token", optText(func(o *models.Operation) **string { return &o.EndedLeaseToken })},
	{"created_at", integer(func(o *models.Operation) *int64 { return &o.CreatedAt })},
	{"updated_at", integer(func(o *models.Operation) *int64 { return &o.UpdatedAt })},
	{"seq", integer(func(o *models.Operation) *int64 { return &o.Seq })},
	{"flow", boolean(func(o *models.Operation) *bool { return &o.Flow })},
	{"weight", integer(func(o *models.Operation) *int64 { return &o.Weight })},
}

// byName finds a column's setter.
var byName = func() map[string]setter {
	m := make(map[string]setter, len(columns))
	for _, c := range columns {
		m[c.name] = c.set
	}
	return m
}()

// Names returns the operation table's columns in model order.
func Names() []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return out
}

// Into returns a hooks.RowsFunc that appends every row of a statement to
// dst. Columns it does not know (an application's own, on a table it
// widened) are read and dropped; a model column the statement did not
// return keeps its zero value, as with gorm's scan.
func Into(dst *[]models.Operation) hooks.RowsFunc {
	return func(rows *sql.Rows) (int64, error) {
		cols, err := rows.Columns()
		if err != nil {
			return 0, err
		}
		sets := make([]setter, len(cols))
		for i, c := range cols {
			sets[i] = byName[c]
		}
		vals := make([]any, len(cols))
		dests := make([]any, len(cols))
		for i := range vals {
			dests[i] = &vals[i]
		}
		var n int64
		for rows.Next() {
			if err := rows.Scan(dests...); err != nil {
				return n, err
			}
			*dst = append(*dst, models.Operation{})
			op := &(*dst)[len(*dst)-1]
			for i, set := range sets {
				if set == nil {
					continue
				}
				if err := set(op, vals[i]); err != nil {
					return n, fmt.Errorf("decode %s: %w", cols[i], err)
				}
			}
			n++
		}
		return n, rows.Err()
	}
}

// text sets a NOT NULL text column (NULL, which the schema refuses, reads
// as "", as gorm's scan has it).
func text(f func(*models.Operation) *string) setter {
	return func(o *models.Operation, v any) error {
		s, _, err := asText(v)
		*f(o) = s
		return err
	}
}

// optText sets a nullable text column: NULL is nil.
func optText(f func(*models.Operation) **string) setter {
	return func(o *models.Operation, v any) error {
		s, ok, err := asText(v)
		if ok {
			*f(o) = &s
		} else {
			*f(o) = nil
		}
		return err
	}
}

// integer sets a NOT NULL integer column.
func integer(f func(*models.Operation) *int64) setter {
	return func(o *models.Operation, v any) error {
		n, _, err := asInt(v)
		*f(o) = n
		return err
	}
}

// optInteger sets a nullable integer column: NULL is nil.
func optInteger(f func(*models.Operation) **int64) setter {
	return func(o *models.Operation, v any) error {
		n, ok, err := asInt(v)
		if ok {
			*f(o) = &n
		} else {
			*f(o) = nil
		}
		return err
	}
}

// boolean sets a NOT NULL boolean column: PostgreSQL's bool, SQLite's 0 or 1.
func boolean(f func(*models.Operation) *bool) setter {
	return func(o *models.Operation, v any) error {
		switch x := v.(type) {
		case bool:
			*f(o) = x
		case nil:
			*f(o) = false
		default:
			n, _, err := asInt(v)
			if err != nil {
				return err
			}
			*f(o) = n != 0
		}
		return nil
	}
}

// jsonCol sets a JSON column through models.JSON's own Scan, which checks
// the document (malformed text is an error, never a silent NULL).
func jsonCol(f func(*models.Operation) *models.JSON) setter {
	return func(o *models.Operation, v any) error { return f(o).Scan(v) }
}

// asText reads a text value as the drivers return it: a string, or bytes
// (database/sql copied them for an interface destination).
func asText(v any) (string, bool, error) {
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case []byte:
		return string(x), true, nil
	}
	return "", false, fmt.Errorf("text column holds %T", v)
}

// asInt reads an integer value: an int64 from both drivers, or its text
// (a column an adopted schema declared otherwise).
func asInt(v any) (int64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case int32:
		return int64(x), true, nil
	case float64:
		if x != float64(int64(x)) {
			return 0, false, fmt.Errorf("integer column holds %v", x)
		}
		return int64(x), true, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil, err
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil, err
	}
	return 0, false, fmt.Errorf("integer column holds %T", v)
}
