package flow

import (
	"fmt"
	"strings"

	"github.com/connstore/connstore/internal/jsonrows"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// A claim serves hundreds of accounts at once (a claim of 1,024 spread
// over 10,000 accounts serves 1,024), and a commit wakes as many: each
// per-account step is one statement over all of them, the accounts bound
// as JSON rows (jsonrows.Table, the table v with columns c and a, the
// connector and the account key, and the step's own), so a claim's or a
// wake's round trips and plans do not grow with the accounts it serves.
// A statement per account cost more than the work it served.

// accountRows is the accounts as the table v: c, a, then more, whose
// values vals gives for each account.
func accountRows(s Store, keys []Key, more []jsonrows.Col, vals func(i int) []any) (string, []any, error) {
	cols := append([]jsonrows.Col{jsonrows.Text("c"), jsonrows.Text("a")}, more...)
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = append([]any{k.ConnectorName, k.AccountKey}, valsOr(vals, i)...)
	}
	sql, vars, err := jsonrows.Table(s.Dialect.Name(), "v", cols, rows)
	if err != nil {
		return "", nil, fmt.Errorf("bind accounts: %w", err)
	}
	return sql, vars, nil
}

func valsOr(vals func(int) []any, i int) []any {
	if vals == nil {
		return nil
	}
	return vals(i)
}

// keysOf is the accounts' keys.
func keysOf(accounts []*Account) []Key {
	keys := make([]Key, len(accounts))
	for i, a := range accounts {
		keys[i] = Key{a.Row.ConnectorName, a.Row.AccountKey}
	}
	return keys
}

// vRef is a column of v, written into a statement as it is.
func vRef(col string) clause.Expr { return clause.Expr{SQL: "v." + col} }

// limitBy is a LIMIT written as an expression of v (a lateral reference).
type limitBy string

// Name is the clause gorm builds it as, in place of clause.Limit.
func (limitBy) Name() string { return "LIMIT" }

// Build writes LIMIT expr.
func (l limitBy) Build(b clause.Builder) { b.WriteString("LIMIT " + string(l)) }

// MergeClause makes l the statement's LIMIT.
func (l limitBy) MergeClause(c *clause.Clause) {
	c.Name = ""
	c.Expression = l
}

// eachAccount runs, for each account, the query q builds for it (c and a
// its connector and account key, as values or as references to v),
// limited to limit(i) rows unless limit is nil, locking them (skipping
// locked ones) when lock is set, and returns every row. Where the database
// has LATERAL (PostgreSQL) it is one statement: v joined to q, each
// account's rows limited by its own v.n. SQLite's LIMIT cannot read an
// outer row: there the same query runs once per account, accountChunk of
// them to a compound SELECT (in-process, a statement costs no round trip).
func eachAccount[T any](s Store, accounts []*Account, limit func(i int) int, lock bool,
	q func(c, a any) *gorm.DB) ([]T, error) {
	locked := func(q *gorm.DB) *gorm.DB {
		if lock {
			return s.Dialect.LockRows(q, false, true)
		}
		return q
	}
	if !s.Dialect.Lateral() {
		probes := make([]*gorm.DB, len(accounts))
		for i, a := range accounts {
			probe := q(a.Row.ConnectorName, a.Row.AccountKey)
			if limit != nil {
				probe = s.Dialect.FixedLimit(probe, limit(i))
			}
			probes[i] = locked(probe)
		}
		return unionAll[T](s.DB, probes)
	}
	var more []jsonrows.Col
	var vals func(int) []any
	inner := q(vRef("c"), vRef("a"))
	if limit != nil {
		more = []jsonrows.Col{{Name: "n", Type: "bigint"}}
		vals = func(i int) []any { return []any{int64(limit(i))} }
		inner = inner.Clauses(limitBy("v.n"))
	}
	from, vars, err := accountRows(s, keysOf(accounts), more, vals)
	if err != nil {
		return nil, err
	}
	var out []T
	err = s.DB.Raw("SELECT p.* FROM "+from+" CROSS JOIN LATERAL (?) AS p", append(vars, locked(inner))...).Scan(&out).Error
	return out, err
}

// unionAll runs the queries as UNION ALL statements of accountChunk
// queries each (each its own subquery, so each keeps its ORDER BY and
// LIMIT) and returns every row.
func unionAll[T any](db *gorm.DB, qs []*gorm.DB) ([]T, error) {
	var out []T
	for start := 0; start < len(qs); start += accountChunk {
		part := qs[start:min(start+accountChunk, len(qs))]
		parts := make([]string, len(part))
		vars := make([]any, len(part))
		for i, q := range part {
			parts[i] = fmt.Sprintf("SELECT * FROM (?) AS p%d", i)
			vars[i] = q
		}
		var rows []T
		if err := db.Raw(strings.Join(parts, " UNION ALL "), vars...).Scan(&rows).Error; err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// accountChunk is how many accounts one compound SELECT serves where the
// database has no LATERAL (SQLite allows 500 terms; fewer keep each
// statement's plan small).
const accountChunk = 50

// updateFrom runs [with] UPDATE table SET set FROM v WHERE the row is v's
// account (and where, when not empty): one statement for every account of
// v.
func updateFrom(db *gorm.DB, with string, withVars []any, from string, fromVars []any, set string, setVars []any,
	where string, whereVars ...any) (int64, error) {
	sql := with + "UPDATE " + Table + " SET " + set + " FROM " + from + " WHERE " + Table + ".connector_name = v.c AND " + Table + ".account_key = v.a"
	if where != "" {
		sql += " AND " + where
	}
	vars := append(append(append(append([]any{}, withVars...), setVars...), fromVars...), whereVars...)
	res := db.Exec(sql, vars...)
	return res.RowsAffected, res.Error
}
