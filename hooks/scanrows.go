package hooks

import (
	"context"
	"database/sql"
	"errors"

	"gorm.io/gorm"
)

// RowsFunc reads the rows of a statement marked with ScanRows, all of
// them, and returns how many it read.
type RowsFunc func(rows *sql.Rows) (int64, error)

const (
	scanKey        = "connstore:scan_rows"
	scanMarkerName = Name + ":scan_rows"
)

// ScanRows marks db's next query or RETURNING update so that its rows go
// to fn instead of gorm's reflective scan into the model: gorm still
// builds the statement and runs every callback around it (this plugin's
// guard, gorm.io/plugin/dbresolver's routing, tracing plugins' spans), so
// the statement is the one gorm would have run, seen by the same
// callbacks; only the decoding of its rows differs. The statement's model
// or destination is left empty; db.RowsAffected is what fn returned. The
// repository reads its operation rows this way, with a decoder written for
// them (BENCHMARKS.md: gorm's scan was most of a claim's and a commit's
// CPU in the process).
//
// ScanRows needs the plugin registered; without it the mark is ignored and
// gorm scans as usual, into the (empty) model.
func ScanRows(db *gorm.DB, fn RowsFunc) *gorm.DB { return db.Set(scanKey, fn) }

// installScanRows wraps gorm's query and update callbacks so that they
// honour ScanRows, once per callback chain.
func installScanRows(db *gorm.DB) error {
	q, u := db.Callback().Query(), db.Callback().Update()
	if q.Get(scanMarkerName) != nil {
		return nil // wrapped already (Initialize called again)
	}
	var errs []error
	wrap := func(get func(string) func(*gorm.DB), replace func(string, func(*gorm.DB)) error, name string) {
		orig := get(name)
		if orig == nil {
			errs = append(errs, errors.New("hooks: no "+name+" callback to wrap"))
			return
		}
		errs = append(errs, replace(name, scanning(orig)))
	}
	wrap(q.Get, q.Replace, "gorm:query")
	wrap(u.Get, u.Replace, "gorm:update")
	errs = append(errs, q.After("*").Register(scanMarkerName, func(*gorm.DB) {}))
	return errors.Join(errs...)
}

// scanning runs gorm's own callback orig with the statement's connection
// wrapped, when the statement is marked: the wrapper runs each query
// orig sends and hands its rows to the mark's function before orig sees
// them, so orig scans nothing.
func scanning(orig func(*gorm.DB)) func(*gorm.DB) {
	return func(db *gorm.DB) {
		v, ok := db.Statement.Settings.Load(scanKey)
		fn, _ := v.(RowsFunc)
		if !ok || fn == nil || db.Statement.ConnPool == nil {
			orig(db)
			return
		}
		pool := &scanPool{ConnPool: db.Statement.ConnPool, fn: fn}
		db.Statement.ConnPool = pool
		orig(db)
		db.Statement.ConnPool = pool.ConnPool
		if pool.ran {
			db.RowsAffected = pool.n
			if db.Statement.Result != nil {
				db.Statement.Result.RowsAffected = pool.n
			}
			if pool.err != nil {
				_ = db.AddError(pool.err)
			}
		}
	}
}

// scanPool is a connection whose queries' rows are read by fn before they
// are returned (exhausted) to gorm.
type scanPool struct {
	gorm.ConnPool
	fn  RowsFunc
	ran bool
	n   int64
	err error
}

// QueryContext runs the query and reads its rows with fn.
func (p *scanPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := p.ConnPool.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	p.ran = true
	p.n, p.err = p.fn(rows)
	if err := rows.Err(); err != nil && p.err == nil {
		p.err = err
	}
	// Closed, whether fn read every row or stopped at an error: gorm's scan
	// then finds no row to put into the model.
	if err := rows.Close(); err != nil && p.err == nil {
		p.err = err
	}
	return rows, nil
}
