package store

import (
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Fixed is a statement of one shape whose text gorm would build the same
// way on every call: its bind variables rendered once, for one database,
// when a repository is made. Run, it goes through db's callbacks exactly as
// db.Raw and db.Exec do (the application's logger, tracer and read/write
// splitter see the same text and values); only the text is not rebuilt. A
// hot statement paid for that rebuilding on every call: gorm copies the text
// byte by byte and binds each value anew, a third of a sync-state CAS's
// allocations.
//
// Its values are bound as they are, so they must be values gorm binds as
// they are too: driver values, driver.Valuers and pointers to them, never
// slices to expand, expressions or subqueries.
type Fixed struct {
	text string
	vars int
}

// Render renders text (? placeholders, none right after a parenthesis, where
// gorm expands a slice) for db's dialect.
func Render(db *gorm.DB, text string) Fixed {
	n := strings.Count(text, "?")
	stmt := &gorm.Statement{DB: db}
	clause.Expr{SQL: text, Vars: make([]any, n)}.Build(stmt)
	return Fixed{text: stmt.SQL.String(), vars: n}
}

// Text is the rendered text.
func (f Fixed) Text() string { return f.text }

// Exec runs the statement through db's Raw callbacks, as db.Exec does.
func (f Fixed) Exec(db *gorm.DB, vars ...any) *gorm.DB {
	tx := f.load(db, vars)
	return tx.Callback().Raw().Execute(tx)
}

// Rows runs the query through db's Row callbacks, as db.Raw(…).Rows() does.
func (f Fixed) Rows(db *gorm.DB, vars ...any) (*sql.Rows, error) {
	return f.load(db, vars).Rows()
}

// load gives the statement a gorm instance of its own (Clauses without
// clauses makes one, as Raw and Exec do) holding the text and vars.
func (f Fixed) load(db *gorm.DB, vars []any) *gorm.DB {
	tx := db.Clauses()
	if len(vars) != f.vars {
		_ = tx.AddError(fmt.Errorf("store: %d values for a statement of %d variables", len(vars), f.vars))
	}
	tx.Statement.SQL.Reset()
	tx.Statement.SQL.WriteString(f.text)
	tx.Statement.Vars = vars
	return tx
}
