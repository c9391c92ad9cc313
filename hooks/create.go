package hooks

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// beforeCreate seeds version 0 and, where the model has one, a fresh
// incarnation on every inserted row that does not carry one yet, and makes
// an upsert's update branch a guarded write (see guardUpsert). A Save of a
// slice, and a child saved with FullSaveAssociations, are written one
// guarded Save per row (see savePerRow); an UpdateAll upsert of rows that
// carry a read lock is refused.
func (p *Plugin) beforeCreate(db *gorm.DB) {
	lf, byTable := p.guarded(db)
	if lf == nil {
		return
	}
	stmt := db.Statement
	if !byTable && saveLikeUpsert(db) {
		p.savePerRow(db, lf)
		return
	}
	if err := refuseLoadedUpsert(db, lf, byTable); err != nil {
		db.AddError(err)
		return
	}
	if maps, ok := destMaps(stmt.Dest); ok {
		for _, dest := range maps {
			dest[lf.version.DBName] = int64(0)
			if lf.incarnation != nil && dest[lf.incarnation.DBName] == nil {
				dest[lf.incarnation.DBName] = p.newID()
			}
		}
	} else if !byTable {
		eachRow(stmt.ReflectValue, func(row reflect.Value) { p.seedRow(stmt, lf, row) })
	}
	guardUpsert(db, lf, byTable)
}

// destMaps returns the column maps a Create writes, for every map form
// gorm accepts.
func destMaps(dest any) ([]map[string]any, bool) {
	switch d := dest.(type) {
	case map[string]any:
		return []map[string]any{d}, true
	case *map[string]any:
		if d == nil {
			return nil, false
		}
		return []map[string]any{*d}, true
	case []map[string]any:
		return d, true
	case *[]map[string]any:
		if d == nil {
			return nil, false
		}
		return *d, true
	}
	return nil, false
}

// onConflict returns the statement's ON CONFLICT clause, if any.
func onConflict(stmt *gorm.Statement) (clause.OnConflict, bool) {
	c, ok := stmt.Clauses["ON CONFLICT"]
	if !ok {
		return clause.OnConflict{}, false
	}
	oc, ok := c.Expression.(clause.OnConflict)
	return oc, ok
}

// saveLikeUpsert reports the upsert gorm issues for a Save of a slice and
// for a child saved with FullSaveAssociations: ON CONFLICT UpdateAll with
// gorm's update_track_time set. It writes back rows as read, so it must be
// a compare-and-swap per row, which one INSERT cannot express (a row
// carrying a read lock whose row is gone must not be inserted).
func saveLikeUpsert(db *gorm.DB) bool {
	oc, ok := onConflict(db.Statement)
	if !ok || !oc.UpdateAll || oc.DoNothing {
		return false
	}
	track, _ := db.Get("gorm:update_track_time")
	if track != true {
		return false
	}
	n := 0
	eachRow(db.Statement.ReflectValue, func(reflect.Value) { n++ })
	return n > 0
}

// errWrittenPerRow stops gorm:create after savePerRow wrote every row; it
// is cleared by createDone before associations are saved.
var errWrittenPerRow = errors.New("connstore: rows already written one by one (internal marker)")

// rowsState is what savePerRow hands to createDone and settleCreate.
type rowsState struct {
	stmt    *gorm.Statement
	lf      *lockFields
	rows    []readRow
	written int64
}

func (st *rowsState) owner() *gorm.Statement { return st.stmt }

// savePerRow writes a save-like upsert as one Save per row on the
// statement's own connection: a row carrying a read lock is a guarded
// UPDATE (ErrConflict when stale, deleted or recreated), a row never read
// is the single-row Save's insert-if-absent, a row without a key is an
// insert. The rows are written in one transaction (the statement's, or one
// opened here), so a refused row leaves none of them written. gorm's own
// INSERT is then skipped; the statement's associations and after-create
// hooks still run as for any Create.
func (p *Plugin) savePerRow(db *gorm.DB, lf *lockFields) {
	stmt := db.Statement
	st := &rowsState{stmt: stmt, lf: lf}
	stmt.Settings.Store(rowsStateKey, st)
	conn := db.Session(&gorm.Session{NewDB: true, SkipHooks: true})
	_, inTx := stmt.ConnPool.(gorm.TxCommitter)
	if !inTx && !db.DryRun {
		if conn = conn.Begin(); conn.Error != nil {
			db.AddError(conn.Error)
			return
		}
	}
	var err error
	i := -1
	eachRow(stmt.ReflectValue, func(row reflect.Value) {
		i++
		if err != nil {
			return
		}
		if !row.CanAddr() {
			err = fmt.Errorf("%w: %s row %d is not addressable", ErrUnguardedWrite, stmt.Table, i)
			return
		}
		st.rows = append(st.rows, readLock(stmt, lf, row))
		tx := conn // a new statement per call: conn's clone mode starts each one fresh
		if len(stmt.Selects) > 0 {
			tx = tx.Select(stmt.Selects)
		}
		tx = tx.Omit(append(slices.Clone(stmt.Omits), clause.Associations)...).Save(row.Addr().Interface())
		if tx.Error != nil {
			err = fmt.Errorf("%s row %d: %w", stmt.Table, i, tx.Error)
			return
		}
		st.written += tx.RowsAffected
	})
	if !inTx && !db.DryRun {
		if err != nil {
			conn.Rollback()
		} else {
			err = conn.Commit().Error
		}
	}
	if err != nil {
		db.AddError(err)
		return
	}
	db.Error = errWrittenPerRow
	db.RowsAffected = st.written
}

// createDone runs right after gorm:create: it clears savePerRow's marker
// so associations, hooks and the commit proceed.
func (p *Plugin) createDone(db *gorm.DB) {
	switch {
	case db.Error == nil:
	case db.Error == errWrittenPerRow:
		db.Error = nil
	case strings.HasPrefix(db.Error.Error(), errWrittenPerRow.Error()+"; "):
		// gorm's AddError joined a later error as "marker; err" (%w on err).
		if err := errors.Unwrap(db.Error); err != nil {
			db.Error = err
		}
	}
}

// settleCreate runs last: when the statement failed after savePerRow (a
// row refused, a child, the commit), every row's lock goes back to the one
// it was read with, since none of its writes were kept.
func (p *Plugin) settleCreate(db *gorm.DB) {
	st, _ := stateOf(db, rowsStateKey).(*rowsState)
	if st == nil {
		return
	}
	db.Statement.Settings.Delete(rowsStateKey)
	if db.Error == nil && !db.DryRun {
		return
	}
	for _, r := range st.rows {
		r.restore(db.Statement, st.lf)
	}
}

// refuseLoadedUpsert refuses an explicit UpdateAll upsert (not a Save) of
// rows carrying a read lock: its update branch would overwrite whatever is
// stored, newer writes included, and one INSERT cannot compare each row's
// lock, nor refuse to re-insert a row that was deleted. KeepLockOnConflict
// declares such a blind upsert deliberate. On a statement that names a
// locked table with no model, UpdateAll is refused outright: gorm cannot
// expand it without a schema and the plugin cannot guard it.
func refuseLoadedUpsert(db *gorm.DB, lf *lockFields, byTable bool) error {
	stmt := db.Statement
	oc, ok := onConflict(stmt)
	if !ok || !oc.UpdateAll || oc.DoNothing {
		return nil
	}
	if byTable {
		return fmt.Errorf("%w: an UpdateAll upsert naming locked table %s; list the columns (DoUpdates) or write through the model",
			ErrUnguardedWrite, lf.schema.Table)
	}
	if keep, _ := db.Get(keepLockKey); keep == true {
		return nil
	}
	loaded := -1
	i := -1
	eachRow(stmt.ReflectValue, func(row reflect.Value) {
		i++
		if loaded < 0 && !readLock(stmt, lf, row).zero() {
			loaded = i
		}
	})
	if maps, ok := destMaps(stmt.Dest); ok && lf.incarnation != nil {
		for j, m := range maps {
			if v := m[lf.incarnation.DBName]; loaded < 0 && v != nil && v != "" && v != (*string)(nil) {
				loaded = j
			}
		}
	}
	if loaded < 0 {
		return nil
	}
	return fmt.Errorf("%w: an UpdateAll upsert of %s whose row %d carries a read lock would overwrite newer writes "+
		"without comparing them; write read rows with Save or Updates, or use KeepLockOnConflict for a deliberate blind upsert",
		ErrUnguardedWrite, stmt.Table, loaded)
}

func (p *Plugin) seedRow(stmt *gorm.Statement, lf *lockFields, row reflect.Value) {
	if !row.CanAddr() {
		return
	}
	stmt.AddError(lf.version.Set(stmt.Context, row, int64(0)))
	if lf.incarnation == nil {
		return
	}
	if _, zero := lf.incarnation.ValueOf(stmt.Context, row); zero {
		stmt.AddError(lf.incarnation.Set(stmt.Context, row, models.StrPtr(p.newID())))
	}
}

func eachRow(rv reflect.Value, fn func(reflect.Value)) {
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Struct:
		fn(rv)
	case reflect.Slice, reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			eachRow(rv.Index(i), fn)
		}
	}
}

// guardUpsert rewrites ON CONFLICT … DO UPDATE on a locked model: the
// update branch must never write the inserted row's version (0) or fresh
// incarnation over a stored row, which would let a writer that read the row
// long ago win its next compare-and-swap. The lock columns leave the SET list
// and the version is bumped from the stored value; the stored incarnation
// stays. UpdateAll is expanded here, as gorm would, minus the lock columns.
// KeepLockOnConflict leaves the version as stored instead of bumping it.
func guardUpsert(db *gorm.DB, lf *lockFields, byTable bool) {
	stmt := db.Statement
	oc, ok := onConflict(stmt)
	if !ok || oc.DoNothing || (!oc.UpdateAll && len(oc.DoUpdates) == 0) {
		return
	}
	if oc.UpdateAll && !byTable { // refuseLoadedUpsert refused it by table
		oc.UpdateAll = false
		oc.DoUpdates = clause.AssignmentColumns(updatableColumns(stmt.Schema, lf))
		if len(oc.Columns) == 0 {
			for _, f := range stmt.Schema.PrimaryFields {
				oc.Columns = append(oc.Columns, clause.Column{Name: f.DBName})
			}
		}
	}
	kept := oc.DoUpdates[:0:0]
	for _, a := range oc.DoUpdates {
		if !lf.isLockColumn(a.Column.Name) {
			kept = append(kept, a)
		}
	}
	if v, _ := db.Get(keepLockKey); v != true {
		kept = append(kept, clause.Assignment{Column: clause.Column{Name: lf.version.DBName},
			Value: gorm.Expr("? + 1", clause.Column{Table: stmt.Table, Name: lf.version.DBName})})
	}
	oc.DoUpdates = kept
	c := stmt.Clauses["ON CONFLICT"]
	c.Expression = oc
	stmt.Clauses["ON CONFLICT"] = c
}

// updatableColumns is what gorm's UpdateAll would set, minus the lock.
func updatableColumns(s *schema.Schema, lf *lockFields) []string {
	var cols []string
	for _, f := range s.Fields {
		if f.DBName == "" || f.PrimaryKey || !f.Creatable || !f.Updatable || f.AutoCreateTime > 0 || lf.isLockColumn(f.DBName) {
			continue
		}
		cols = append(cols, f.DBName)
	}
	return cols
}
