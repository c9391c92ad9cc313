package hooks

import (
	"fmt"
	"reflect"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

const (
	versionColumn     = "version"
	incarnationColumn = "incarnation"
)

var lockerType = reflect.TypeFor[models.Locker]()

// lockedSchema reports whether the statement's model embeds a lock, and
// whether that lock has an incarnation.
func lockedSchema(stmt *gorm.Statement) (locked, hasIncarnation bool) {
	if stmt.Schema == nil || !reflect.PointerTo(stmt.Schema.ModelType).Implements(lockerType) {
		return false, false
	}
	zero := reflect.New(stmt.Schema.ModelType).Interface().(models.Locker)
	return true, zero.LockState().HasIncarnation
}

// beforeCreate seeds version 0 and, where the model has one, a fresh
// incarnation on every inserted row that does not carry one yet.
func (p *Plugin) beforeCreate(db *gorm.DB) {
	if db.Error != nil || skipped(db) {
		return
	}
	locked, hasIncarnation := lockedSchema(db.Statement)
	if !locked {
		return
	}
	if dest, ok := db.Statement.Dest.(map[string]any); ok {
		dest[versionColumn] = int64(0)
		if _, set := dest[incarnationColumn]; hasIncarnation && !set {
			dest[incarnationColumn] = p.newID()
		}
		return
	}
	eachRow(db.Statement.ReflectValue, func(row reflect.Value) {
		if !row.CanAddr() {
			return
		}
		locker := row.Addr().Interface().(models.Locker)
		locker.SetLockVersion(0)
		if lock, ok := row.Addr().Interface().(interface{ LockFields() *models.Lock }); ok {
			if hasIncarnation && lock.LockFields().Incarnation == nil {
				lock.LockFields().Incarnation = models.StrPtr(p.newID())
			}
		}
	})
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

// beforeUpdate turns an update of a loaded row into a compare-and-swap on
// the lock it was read with, and a set-based update into a version bump.
func (p *Plugin) beforeUpdate(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || skipped(db) {
		return
	}
	if locked, _ := lockedSchema(stmt); !locked {
		return
	}
	locker, single := loadedRow(stmt)
	if !single {
		bumpVersion(db)
		return
	}
	read := locker.LockState()
	if read.HasIncarnation && read.Incarnation == "" {
		db.AddError(fmt.Errorf("%w: %s row has no incarnation", ErrMissingLock, stmt.Table))
		return
	}
	where := []clause.Expression{clause.Eq{Column: column(versionColumn), Value: read.Version}}
	if read.HasIncarnation {
		where = append(where, clause.Eq{Column: column(incarnationColumn), Value: read.Incarnation})
	}
	stmt.AddClause(clause.Where{Exprs: where})
	selectVersion(stmt)
	stmt.SetColumn(versionColumn, read.Version+1, true)
	stmt.Settings.Store(readStateKey, read)
}

// afterUpdate reports a guarded update that matched no row as ErrConflict
// and keeps the in-memory version in step with the database.
func (p *Plugin) afterUpdate(db *gorm.DB) {
	v, ok := db.Statement.Settings.LoadAndDelete(readStateKey)
	if !ok {
		return
	}
	read := v.(models.LockState)
	locker, _ := loadedRow(db.Statement)
	if db.DryRun { // nothing ran: no conflict to report, no version to advance
		locker.SetLockVersion(read.Version)
		return
	}
	if db.Error == nil && db.RowsAffected == 0 {
		db.AddError(fmt.Errorf("%w: %s at version %d", ErrConflict, db.Statement.Table, read.Version))
	}
	if db.Error != nil {
		locker.SetLockVersion(read.Version)
		return
	}
	locker.SetLockVersion(read.Version + 1)
}

// loadedRow returns the model's lock when the statement updates exactly one
// row identified by the model's primary key.
func loadedRow(stmt *gorm.Statement) (models.Locker, bool) {
	rv := stmt.ReflectValue
	if rv.Kind() != reflect.Struct || !rv.CanAddr() {
		return nil, false
	}
	for _, f := range stmt.Schema.PrimaryFields {
		if _, zero := f.ValueOf(stmt.Context, rv); zero {
			return nil, false
		}
	}
	return rv.Addr().Interface().(models.Locker), true
}

// bumpVersion adds version = version + 1 to a set-based update. A struct
// cannot carry that expression, so such an update must use a column map.
func bumpVersion(db *gorm.DB) {
	stmt := db.Statement
	dest, ok := stmt.Dest.(map[string]any)
	if !ok {
		db.AddError(fmt.Errorf("%w: set-based update of %s needs a column map", ErrMissingLock, stmt.Table))
		return
	}
	dest[versionColumn] = gorm.Expr(stmt.Quote(versionColumn) + " + 1")
	selectVersion(stmt)
}

// selectVersion keeps the version column in an explicit Select list.
func selectVersion(stmt *gorm.Statement) {
	if len(stmt.Selects) == 0 {
		return
	}
	for _, s := range stmt.Selects {
		if s == "*" || s == versionColumn {
			return
		}
	}
	stmt.Selects = append(stmt.Selects, versionColumn)
}

func column(name string) clause.Column {
	return clause.Column{Table: clause.CurrentTable, Name: name}
}
