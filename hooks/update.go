package hooks

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// updateState is what beforeUpdate hands to verifyUpdate and settleUpdate
// for one statement.
type updateState struct {
	stmt      *gorm.Statement // the statement it belongs to (settings are copied to children)
	lf        *lockFields
	rows      []readRow // the loaded rows, each addressable, with the lock each was read at
	many      bool      // a slice of loaded rows, each guarded by its own lock
	expected  int64     // rows a multi-row update must match: its distinct (key, lock) pairs
	saveLike  bool      // Save (or Select("*") of the model itself)
	returning bool      // RETURNING scans the stored rows (and their versions) back
	inserted  bool      // verifyUpdate inserted the row a never-read Save found absent
}

// readRow is one loaded row and the lock it was read with.
type readRow struct {
	v           reflect.Value
	version     int64
	incarnation *string
}

// zero reports a lock that was never read: version 0 and no incarnation.
func (r readRow) zero() bool {
	return r.version == 0 && (r.incarnation == nil || *r.incarnation == "")
}

func readLock(stmt *gorm.Statement, lf *lockFields, row reflect.Value) readRow {
	r := readRow{v: row}
	if v, _ := lf.version.ValueOf(stmt.Context, row); v != nil {
		r.version, _ = v.(int64)
	}
	if lf.incarnation != nil {
		if v, _ := lf.incarnation.ValueOf(stmt.Context, row); v != nil {
			if p, ok := v.(*string); ok && p != nil {
				s := *p
				r.incarnation = &s
			}
		}
	}
	return r
}

// restore puts the lock the row was read with back on it.
func (r readRow) restore(stmt *gorm.Statement, lf *lockFields) {
	_ = lf.version.Set(stmt.Context, r.v, r.version)
	if lf.incarnation != nil {
		_ = lf.incarnation.Set(stmt.Context, r.v, r.incarnation)
	}
}

// beforeUpdate turns an update of a loaded row into a compare-and-swap on
// the lock it was read with, an update of a slice of loaded rows into one
// compare-and-swap per row, and a set-based update into a version bump.
// The lock columns are the plugin's: a struct or map naming them has them
// removed from the SET list.
func (p *Plugin) beforeUpdate(db *gorm.DB) {
	lf, byTable := p.guarded(db)
	if lf == nil {
		return
	}
	stmt := db.Statement
	if byTable {
		bumpByTable(db, lf)
		return
	}
	rows, many, err := loadedRows(stmt)
	if err != nil {
		db.AddError(err)
		return
	}
	same := sameDest(stmt)
	if !same || many || len(rows) == 0 {
		if !destToMap(stmt, lf) {
			db.AddError(fmt.Errorf("%w: cannot guard an update of %s from a %T", ErrMissingLock, stmt.Table, stmt.Dest))
			return
		}
	}
	if len(rows) == 0 {
		stmt.SetColumn(lf.version.DBName, gorm.Expr("? + 1", clause.Column{Name: lf.version.DBName}), true)
		keepSelected(stmt, lf.version.DBName)
		return
	}
	_, returning := stmt.Clauses["RETURNING"]
	st := &updateState{stmt: stmt, lf: lf, many: many, returning: returning,
		saveLike: same && !many && len(stmt.Selects) == 1 && stmt.Selects[0] == "*"}
	for _, row := range rows {
		st.rows = append(st.rows, readLock(stmt, lf, row))
	}
	if many {
		if !guardRows(db, st) {
			return
		}
		stmt.SetColumn(lf.version.DBName, gorm.Expr("? + 1", clause.Column{Name: lf.version.DBName}), true)
	} else {
		r := st.rows[0]
		where := []clause.Expression{clause.Eq{Column: column(lf.version.DBName), Value: r.version}}
		if lf.incarnation != nil {
			switch {
			case r.incarnation != nil && *r.incarnation != "":
				where = append(where, clause.Eq{Column: column(lf.incarnation.DBName), Value: *r.incarnation})
			case st.saveLike: // a row never read: only a legacy row without one matches
				where = append(where, clause.Eq{Column: column(lf.incarnation.DBName), Value: nil})
			default:
				db.AddError(fmt.Errorf("%w: %s row has no incarnation (read it before updating)", ErrMissingLock, stmt.Table))
				return
			}
		}
		stmt.AddClause(clause.Where{Exprs: where})
		stmt.SetColumn(lf.version.DBName, r.version+1, true)
	}
	keepSelected(stmt, lf.version.DBName)
	stmt.Settings.Store(readStateKey, st)
}

// guardRows adds one condition per loaded row, its key and the lock it was
// read with, OR-ed: each row is written only at its own read lock, and
// verifyUpdate refuses the statement unless every row matched.
func guardRows(db *gorm.DB, st *updateState) bool {
	stmt, lf := db.Statement, st.lf
	conds := make([]clause.Expression, 0, len(st.rows))
	seen := make(map[string]bool, len(st.rows))
	for i, r := range st.rows {
		var and []clause.Expression
		var key []any
		for _, f := range stmt.Schema.PrimaryFields {
			v, _ := f.ValueOf(stmt.Context, r.v)
			and = append(and, clause.Eq{Column: column(f.DBName), Value: v})
			key = append(key, v)
		}
		and = append(and, clause.Eq{Column: column(lf.version.DBName), Value: r.version})
		key = append(key, r.version)
		if lf.incarnation != nil {
			if r.incarnation == nil || *r.incarnation == "" {
				db.AddError(fmt.Errorf("%w: %s row %d has no incarnation (read it before updating)", ErrMissingLock, stmt.Table, i))
				return false
			}
			and = append(and, clause.Eq{Column: column(lf.incarnation.DBName), Value: *r.incarnation})
			key = append(key, *r.incarnation)
		}
		// Two copies of one row at the same lock match it once; at two
		// different locks at most one can match, so both are expected.
		if k := fmt.Sprintf("%#v", key); !seen[k] {
			seen[k] = true
			st.expected++
		}
		conds = append(conds, clause.And(and...))
	}
	// A single OrConditions would be joined to the other conditions with OR.
	where := conds[0]
	if len(conds) > 1 {
		where = clause.Or(conds...)
	}
	stmt.AddClause(clause.Where{Exprs: []clause.Expression{where}})
	return true
}

// verifyUpdate runs right after the UPDATE, before children are saved and
// before the default transaction commits. A guarded update that matched
// fewer rows than it guards is ErrConflict, never a silent success. A Save
// of a row never read (zero lock) that matched nothing inserts the row,
// INSERT … ON CONFLICT DO NOTHING on the statement's own connection, and is
// ErrConflict when the row turns out to exist: no separate read decides it,
// so a read replica behind dbresolver cannot. A Save carrying a read lock
// is never an insert: its row was deleted or recreated, ErrConflict.
func (p *Plugin) verifyUpdate(db *gorm.DB) {
	st, _ := stateOf(db, readStateKey).(*updateState)
	if st == nil || db.DryRun || db.Error != nil {
		return
	}
	table := db.Statement.Table
	switch {
	case st.many:
		if db.RowsAffected < st.expected {
			db.AddError(fmt.Errorf("%w: %s: %d of %d rows matched the lock they were read with",
				ErrConflict, table, db.RowsAffected, st.expected))
		}
	case db.RowsAffected > 0:
	case st.saveLike && st.rows[0].zero():
		insertAbsent(db, st)
	default:
		db.AddError(fmt.Errorf("%w: %s at version %d", ErrConflict, table, st.rows[0].version))
	}
}

// insertAbsent inserts the row a never-read Save found no row to update.
// Associations are left to the update's own callbacks, which run next, and
// model hooks are skipped as gorm's own Save fallback skips them.
func insertAbsent(db *gorm.DB, st *updateState) {
	stmt := db.Statement
	var keys []clause.Column
	for _, f := range stmt.Schema.PrimaryFields {
		keys = append(keys, clause.Column{Name: f.DBName})
	}
	tx := db.Session(&gorm.Session{NewDB: true, SkipHooks: true}).Omit(clause.Associations).
		Clauses(clause.OnConflict{Columns: keys, DoNothing: true}).Create(st.rows[0].v.Addr().Interface())
	switch {
	case tx.Error != nil:
		db.AddError(tx.Error)
	case tx.RowsAffected == 0:
		db.AddError(fmt.Errorf("%w: %s row exists; Save of a row never read does not overwrite it", ErrConflict, stmt.Table))
	default:
		st.inserted = true
		db.RowsAffected = tx.RowsAffected // gorm's Save must not fall back to its own insert
	}
}

// settleUpdate runs last, after the commit or rollback: the model's
// version follows the database. A statement that failed anywhere (its
// guard, a child, the commit) leaves the lock as it was read; a row
// verifyUpdate inserted holds version 0 and its fresh incarnation; RETURNING
// has already scanned the stored versions into a slice of rows.
func (p *Plugin) settleUpdate(db *gorm.DB) {
	st, _ := stateOf(db, readStateKey).(*updateState)
	if st == nil {
		return
	}
	db.Statement.Settings.Delete(readStateKey)
	failed := db.DryRun || db.Error != nil
	if st.many && st.returning {
		return
	}
	for _, r := range st.rows {
		switch {
		case failed:
			r.restore(db.Statement, st.lf)
		case st.inserted:
			_ = st.lf.version.Set(db.Statement.Context, r.v, int64(0))
		default:
			_ = st.lf.version.Set(db.Statement.Context, r.v, r.version+1)
		}
	}
}

// stateOf returns the state stored under key by this very statement; a
// child statement inherits its parent's settings and must not act on them.
func stateOf(db *gorm.DB, key string) any {
	v, ok := db.Statement.Settings.Load(key)
	if !ok {
		return nil
	}
	if o, ok := v.(interface{ owner() *gorm.Statement }); ok && o.owner() == db.Statement {
		return v
	}
	return nil
}

func (st *updateState) owner() *gorm.Statement { return st.stmt }

// loadedRows returns the rows an update of the model addresses by primary
// key: the model itself when it is one struct with its key set (a struct
// without one is a set-based update), or every row of a non-empty slice, in
// which case many is true and a row without its key is refused: gorm would
// otherwise update every row the WHERE matches. An empty slice (a RETURNING
// destination) is a set-based update.
func loadedRows(stmt *gorm.Statement) (rows []reflect.Value, many bool, err error) {
	rv := stmt.ReflectValue
	if len(stmt.Schema.PrimaryFields) == 0 {
		return nil, false, nil
	}
	switch rv.Kind() {
	case reflect.Struct:
		if rv.CanAddr() && hasKey(stmt, rv) {
			return []reflect.Value{rv}, false, nil
		}
		return nil, false, nil
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return nil, false, nil
		}
		for i := range rv.Len() {
			row := reflect.Indirect(rv.Index(i))
			if row.Kind() != reflect.Struct || !row.CanAddr() || !hasKey(stmt, row) {
				return nil, true, fmt.Errorf("%w: %s row %d of the model's slice has no primary key to guard it by",
					ErrUnguardedWrite, stmt.Table, i)
			}
			rows = append(rows, row)
		}
		return rows, true, nil
	}
	return nil, false, nil
}

func hasKey(stmt *gorm.Statement, row reflect.Value) bool {
	for _, f := range stmt.Schema.PrimaryFields {
		if _, zero := f.ValueOf(stmt.Context, row); zero {
			return false
		}
	}
	return true
}

// bumpByTable guards an update that names a locked model's table with no
// model schema: the plugin cannot read rows, so, as a set-based update, it
// drops the lock columns from the column map and bumps every matched row's
// version, which fails any compare-and-swap of an older read.
func bumpByTable(db *gorm.DB, lf *lockFields) {
	stmt := db.Statement
	m, ok := stmt.Dest.(map[string]any)
	if !ok {
		db.AddError(fmt.Errorf("%w: an update naming locked table %s needs a column map or the model, not a %T",
			ErrUnguardedWrite, lf.schema.Table, stmt.Dest))
		return
	}
	for k := range m {
		if lf.isLockColumn(k) {
			delete(m, k)
		}
	}
	stmt.SetColumn(lf.version.DBName, gorm.Expr("? + 1", clause.Column{Name: lf.version.DBName}), true)
	keepSelected(stmt, lf.version.DBName)
}

func column(name string) clause.Column {
	return clause.Column{Table: clause.CurrentTable, Name: name}
}
