package store

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SequenceBefore is a receipt recorded before sequence in its partition.
func SequenceBefore(sequence int64) clause.Expr {
	return clause.Expr{SQL: "sequence < ?", Vars: []any{sequence}}
}

// ProvenanceIn is a candidate of one of the provenances sub selects.
func ProvenanceIn(sub any) clause.Expr {
	return clause.Expr{SQL: "provenance IN (?)", Vars: []any{sub}}
}

// Uncommitted is a receipt not yet committed.
var Uncommitted = clause.Expr{SQL: "committed_at IS NULL"}

// InsertCandidates inserts the candidate rows of from (a jsonrows source
// with columns v_document_id, v_source_id and v_model_id, aliased v, and its
// values) under one receipt key, in state. With keep set, rows whose key
// exists are left as they are (ON CONFLICT DO NOTHING); without it the
// statement is a plain INSERT, for a caller that knows no row of the key
// exists and none of its rows repeats a document, and a conflict is a
// unique violation. The statement is written out rather than built from
// structs: a relist can carry 100k candidates, and per-row reflection would
// cost more than the inserts; the key and the constants are bound once per
// statement.
func InsertCandidates(tx *gorm.DB, owner, connector, partition, provenance, state string, now int64,
	from string, vars []any, keep bool) error {
	// WHERE true: SQLite's upsert after a SELECT needs it.
	conflict := ""
	if keep {
		conflict = " ON CONFLICT DO NOTHING"
	}
	return tx.Exec(`INSERT INTO kubun_connector_sweep_candidate (owner_did, connector_name, "partition", provenance,
		document_id, source_id, model_id, state, attempts, apply_failures, updated_at, next_attempt_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), v.v_document_id, v.v_source_id,
			v.v_model_id, CAST(? AS TEXT), 0, 0, CAST(? AS BIGINT), 0 FROM `+from+` WHERE true`+conflict,
		append([]any{owner, connector, partition, provenance, state, now}, vars...)...).Error
}

// RefusedAfter is a candidate's state after one more failed apply: refused
// once it has failed limit times before (apply_failures counts them before
// this one), pending otherwise.
func RefusedAfter(limit int, refused, pending string) clause.Expr {
	return gorm.Expr("CASE WHEN apply_failures >= ? THEN ? ELSE ? END", limit, refused, pending)
}

// Below is quotedColumn < value (the column quoted and qualified by the
// caller's dialect, for an ON CONFLICT update's WHERE).
func Below(quotedColumn string, value any) clause.Expr {
	return gorm.Expr(quotedColumn+" < ?", value)
}
