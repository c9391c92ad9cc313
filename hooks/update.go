package hooks

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// updateState is what beforeUpdate hands to afterUpdate for one statement.
type updateState struct {
	lf       *lockFields
	row      reflect.Value // the loaded row, addressable
	version  int64         // the version it was read at
	saveLike bool          // Save (or Select("*") of the model itself): an absent row is inserted
}

// beforeUpdate turns an update of a loaded row into a compare-and-swap on
// the lock it was read with, and a set-based update into a version bump.
// The lock columns are the plugin's: a struct or map naming them has them
// removed from the SET list.
func (p *Plugin) beforeUpdate(db *gorm.DB) {
	lf := p.guarded(db)
	if lf == nil {
		return
	}
	stmt := db.Statement
	row, single := loadedRow(stmt)
	same := sameDest(stmt)
	if !same || !single {
		if !destToMap(stmt, lf) {
			db.AddError(fmt.Errorf("%w: cannot guard an update of %s from a %T", ErrMissingLock, stmt.Table, stmt.Dest))
			return
		}
	}
	if !single {
		stmt.SetColumn(lf.version.DBName, gorm.Expr("? + 1", clause.Column{Name: lf.version.DBName}), true)
		keepSelected(stmt, lf.version.DBName)
		return
	}
	st := &updateState{lf: lf, row: row, saveLike: same && len(stmt.Selects) == 1 && stmt.Selects[0] == "*"}
	if v, _ := lf.version.ValueOf(stmt.Context, row); v != nil {
		st.version, _ = v.(int64)
	}
	where := []clause.Expression{clause.Eq{Column: column(lf.version.DBName), Value: st.version}}
	if lf.incarnation != nil {
		var incarnation string
		if v, _ := lf.incarnation.ValueOf(stmt.Context, row); v != nil {
			if p, ok := v.(*string); ok && p != nil {
				incarnation = *p
			}
		}
		switch {
		case incarnation != "":
			where = append(where, clause.Eq{Column: column(lf.incarnation.DBName), Value: incarnation})
		case st.saveLike: // a row never read: only an absent row (insert) can match
			where = append(where, clause.Eq{Column: column(lf.incarnation.DBName), Value: nil})
		default:
			db.AddError(fmt.Errorf("%w: %s row has no incarnation (read it before updating)", ErrMissingLock, stmt.Table))
			return
		}
	}
	stmt.AddClause(clause.Where{Exprs: where})
	stmt.SetColumn(lf.version.DBName, st.version+1, true)
	keepSelected(stmt, lf.version.DBName)
	stmt.Settings.Store(readStateKey, st)
}

// afterUpdate reports a guarded update that matched no row as ErrConflict
// (a Save of an absent row is left for gorm's insert fallback) and keeps the
// in-memory version in step with the database.
func (p *Plugin) afterUpdate(db *gorm.DB) {
	v, ok := db.Statement.Settings.LoadAndDelete(readStateKey)
	if !ok {
		return
	}
	st := v.(*updateState)
	next := st.version + 1
	switch {
	case db.DryRun, db.Error != nil: // nothing ran, or it failed
		next = st.version
	case db.RowsAffected == 0 && st.saveLike && !rowExists(db):
		next = st.version // gorm's Save inserts it next
	case db.RowsAffected == 0:
		db.AddError(fmt.Errorf("%w: %s at version %d", ErrConflict, db.Statement.Table, st.version))
		next = st.version
	}
	_ = st.lf.version.Set(db.Statement.Context, st.row, next)
}

// loadedRow returns the model's row when the statement updates exactly one
// row identified by the model's primary key.
func loadedRow(stmt *gorm.Statement) (reflect.Value, bool) {
	rv := stmt.ReflectValue
	if rv.Kind() != reflect.Struct || !rv.CanAddr() || len(stmt.Schema.PrimaryFields) == 0 {
		return reflect.Value{}, false
	}
	for _, f := range stmt.Schema.PrimaryFields {
		if _, zero := f.ValueOf(stmt.Context, rv); zero {
			return reflect.Value{}, false
		}
	}
	return rv, true
}

// rowExists reads whether the row a Save addressed is stored at all.
func rowExists(db *gorm.DB) bool {
	stmt := db.Statement
	q := db.Session(&gorm.Session{NewDB: true}).Table(stmt.Table).Select("1").Limit(1)
	for _, f := range stmt.Schema.PrimaryFields {
		v, _ := f.ValueOf(stmt.Context, stmt.ReflectValue)
		q = q.Where(clause.Eq{Column: clause.Column{Name: f.DBName}, Value: v})
	}
	var found []int
	return q.Find(&found).Error != nil || len(found) > 0
}

func column(name string) clause.Column {
	return clause.Column{Table: clause.CurrentTable, Name: name}
}
