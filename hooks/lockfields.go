package hooks

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

var (
	lockType        = reflect.TypeFor[models.Lock]()
	versionLockType = reflect.TypeFor[models.VersionLock]()
)

// lockFields are a model's lock columns as its schema names them, so an
// embeddedPrefix or a renamed column is honoured.
type lockFields struct {
	schema      *schema.Schema // the model the lock was read from
	version     *schema.Field
	incarnation *schema.Field // nil for models.VersionLock
	// err refuses a model that holds a lock the schema does not map (a
	// named, non-embedded field): writing it unguarded would lose updates.
	err error
}

// lockCache remembers each schema's lock fields (nil means "no lock") and
// the table of every locked model it has resolved, so a write that names
// the table (db.Table("app_account")) with no model is still recognised.
type lockCache struct {
	m      sync.Map // *schema.Schema -> *lockFields
	tables sync.Map // table name -> *lockFields
}

// ofSchema returns s's lock fields, or nil when it has none.
func (c *lockCache) ofSchema(s *schema.Schema) *lockFields {
	if v, ok := c.m.Load(s); ok {
		return v.(*lockFields)
	}
	lf := resolveLock(s)
	c.m.Store(s, lf)
	if lf != nil && lf.err == nil {
		c.tables.LoadOrStore(s.Table, lf)
	}
	return lf
}

// unquote drops the quotes gorm and the dialects put around identifiers.
var unquote = strings.NewReplacer("`", "", `"`, "")

// ofTable returns the lock of the locked model whose table the statement
// names, or nil. The name is the first word of the table expression,
// unquoted, then its last dotted part, so "app_account AS a" and a
// schema-qualified name are recognised; a subquery is not.
func (c *lockCache) ofTable(stmt *gorm.Statement) *lockFields {
	name := stmt.Table
	if stmt.TableExpr != nil {
		if f := strings.Fields(stmt.TableExpr.SQL); len(f) > 0 {
			name = unquote.Replace(f[0])
		}
	}
	for name != "" {
		if v, ok := c.tables.Load(name); ok {
			return v.(*lockFields)
		}
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			break
		}
		name = name[i+1:]
	}
	return nil
}

// guarded returns the lock fields a write must guard, or nil when there is
// nothing to do (an earlier error, SkipLock, no lock). byTable reports a
// statement with no model schema that names a locked model's table: only
// its column map can be guarded. A model whose lock is unmapped, or a
// lockless struct written into a locked table, gets its refusal added to db
// and nil.
func (p *Plugin) guarded(db *gorm.DB) (lf *lockFields, byTable bool) {
	if db.Error != nil || skipped(db) {
		return nil, false
	}
	stmt := db.Statement
	if stmt.Schema != nil {
		lf = p.locks.ofSchema(stmt.Schema)
		if lf != nil && lf.err != nil {
			db.AddError(lf.err)
			return nil, false
		}
		if lf != nil {
			return lf, false
		}
	}
	t := p.locks.ofTable(stmt)
	if t == nil {
		return nil, false
	}
	if stmt.Schema != nil {
		db.AddError(fmt.Errorf("%w: %s is the table of locked model %s, but this write reaches it through %s, "+
			"which holds no lock; write through the model or with a column map", ErrUnguardedWrite,
			t.schema.Table, t.schema.Name, stmt.Schema.Name))
		return nil, false
	}
	return t, true
}

func resolveLock(s *schema.Schema) *lockFields {
	lf := &lockFields{schema: s}
	for _, f := range s.Fields {
		if f.DBName == "" || len(f.BindNames) < 2 {
			continue
		}
		switch owner := ownerType(s.ModelType, f.BindNames[:len(f.BindNames)-1]); {
		case (owner == lockType || owner == versionLockType) && f.Name == "Version":
			lf.version = f
		case owner == lockType && f.Name == "Incarnation":
			lf.incarnation = f
		}
	}
	if lf.version != nil {
		return lf
	}
	if name, ok := heldLock(s.ModelType, map[reflect.Type]bool{}); ok {
		lf.err = fmt.Errorf("%w: %s holds a lock in field %s that the schema does not map; embed it "+
			"(anonymously or with gorm:\"embedded\") so its columns are guarded", ErrMissingLock, s.Name, name)
		return lf
	}
	return nil
}

// ownerType is the struct type that declares the field reached by path.
func ownerType(t reflect.Type, path []string) reflect.Type {
	for _, name := range path {
		sf, ok := t.FieldByName(name)
		if !ok {
			return nil
		}
		t = sf.Type
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}

// heldLock finds a lock struct anywhere in t's fields.
func heldLock(t reflect.Type, seen map[reflect.Type]bool) (string, bool) {
	if t.Kind() != reflect.Struct || seen[t] {
		return "", false
	}
	seen[t] = true
	for i := range t.NumField() {
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft == lockType || ft == versionLockType {
			return t.Field(i).Name, true
		}
		if name, ok := heldLock(ft, seen); ok {
			return t.Field(i).Name + "." + name, true
		}
	}
	return "", false
}

// isLockColumn reports whether name (a column or field name) is a lock column.
func (lf *lockFields) isLockColumn(name string) bool {
	for _, f := range []*schema.Field{lf.version, lf.incarnation} {
		if f != nil && (name == f.DBName || name == f.Name) {
			return true
		}
	}
	return false
}
