package hooks

import (
	"reflect"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// beforeCreate seeds version 0 and, where the model has one, a fresh
// incarnation on every inserted row that does not carry one yet, and makes
// an upsert's update branch a guarded write (see guardUpsert).
func (p *Plugin) beforeCreate(db *gorm.DB) {
	lf := p.guarded(db)
	if lf == nil {
		return
	}
	stmt := db.Statement
	if dest, ok := stmt.Dest.(map[string]any); ok {
		dest[lf.version.DBName] = int64(0)
		if lf.incarnation != nil && dest[lf.incarnation.DBName] == nil {
			dest[lf.incarnation.DBName] = p.newID()
		}
	} else {
		eachRow(stmt.ReflectValue, func(row reflect.Value) { p.seedRow(stmt, lf, row) })
	}
	guardUpsert(db, lf)
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
func guardUpsert(db *gorm.DB, lf *lockFields) {
	stmt := db.Statement
	c, ok := stmt.Clauses["ON CONFLICT"]
	if !ok {
		return
	}
	oc, ok := c.Expression.(clause.OnConflict)
	if !ok || oc.DoNothing || (!oc.UpdateAll && len(oc.DoUpdates) == 0) {
		return
	}
	if oc.UpdateAll {
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
