package fence

import (
	"encoding/json"
	"testing"

	"github.com/connstore/connstore/internal/jsonrows"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func target(i int) Target {
	return Target{CallerDID: "c", OperationID: "op" + string(rune('0'+i)), LeaseToken: "tok"}
}

// TestPlanOf: a column every write sets to one value is set plainly; a
// column whose values differ is read from the rows; one only some writes
// set carries a per-row flag; a guard is a per-row column, NULL where a
// write has none. The statement text depends on the writes' shape, never
// on their number.
func TestPlanOf(t *testing.T) {
	doc := "doc-1"
	etagA, etagB := "a", "b"
	ws := []Write{
		Commit(target(1), &doc, &etagA, nil),
		Commit(target(2), nil, &etagB, nil),
	}
	for i := range ws {
		ws[i].Stamp(7)
	}
	// SQLite's row source is JSON, which the test reads back; the plan is
	// the same on PostgreSQL (TestPlanOf's last step, and the store's
	// conformance suite on every leg).
	p, err := PlanOf("sqlite", ws)
	require.NoError(t, err)
	require.Equal(t, models.OperationCommitted, p.Set["state"], "one value for every write: set plainly")
	require.Equal(t, int64(7), p.Set["updated_at"])
	require.Equal(t, "tok", p.Set["ended_lease_token"])
	require.Equal(t, gorm.Expr("v.v_provider_etag"), p.Set["provider_etag"], "values differ: read per row")
	require.Equal(t, gorm.Expr("CASE WHEN v.s_document_id THEN v.v_document_id ELSE ? END", clause.Column{Name: "document_id"}),
		p.Set["document_id"], "set by some writes only: behind a per-row flag")
	var where []string
	for _, w := range p.Where {
		where = append(where, w.(clause.Expr).SQL)
	}
	require.Contains(t, where, "(v.g_document_id IS NULL OR document_id IS NULL OR document_id = v.g_document_id)")

	from := p.From.(fromRows)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(from.vars[0].(string)), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "a", rows[0]["v_provider_etag"])
	require.Equal(t, true, rows[0]["s_document_id"])
	require.Equal(t, false, rows[1]["s_document_id"])
	require.Equal(t, "doc-1", rows[0]["g_document_id"])
	require.Nil(t, rows[1]["g_document_id"])

	// The same shape, ten times the rows: the same statement text, on both
	// databases.
	var many []Write
	for range 10 {
		many = append(many, ws...)
	}
	for _, dialect := range []string{"sqlite", "postgres"} {
		p2, err := PlanOf(dialect, ws)
		require.NoError(t, err)
		p10, err := PlanOf(dialect, many)
		require.NoError(t, err)
		require.Equal(t, p2.From.(fromRows).sql, p10.From.(fromRows).sql, dialect)
	}
}

// TestPlanRefusesInvalidText: a value travelling in the rows that is not
// valid UTF-8 is refused before any statement exists, on both dialects.
// (A value set plainly is bound as a parameter; the caller validates every
// value before planning, as the repository's validateWrite does.)
func TestPlanRefusesInvalidText(t *testing.T) {
	bad, good := "\xff", "ok"
	for _, dialect := range []string{"postgres", "sqlite"} {
		_, err := PlanOf(dialect, []Write{Commit(target(1), nil, &good, nil), Commit(target(2), nil, &bad, nil)})
		require.ErrorIs(t, err, jsonrows.ErrInvalidUTF8, dialect)
	}
}
