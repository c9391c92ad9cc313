package hooks

import (
	"fmt"
	"reflect"
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
	version     *schema.Field
	incarnation *schema.Field // nil for models.VersionLock
	// err refuses a model that holds a lock the schema does not map (a
	// named, non-embedded field): writing it unguarded would lose updates.
	err error
}

// lockCache remembers each schema's lock fields; nil means "no lock".
type lockCache struct{ m sync.Map }

// of returns the statement model's lock fields, or nil when it has none.
func (c *lockCache) of(stmt *gorm.Statement) *lockFields {
	if stmt.Schema == nil {
		return nil
	}
	if v, ok := c.m.Load(stmt.Schema); ok {
		return v.(*lockFields)
	}
	lf := resolveLock(stmt.Schema)
	c.m.Store(stmt.Schema, lf)
	return lf
}

// guarded returns the lock fields a write must guard, or nil when there is
// nothing to do (an earlier error, SkipLock, no lock). A model whose lock is
// unmapped gets its refusal added to db and nil.
func (p *Plugin) guarded(db *gorm.DB) *lockFields {
	if db.Error != nil || skipped(db) {
		return nil
	}
	lf := p.locks.of(db.Statement)
	if lf != nil && lf.err != nil {
		db.AddError(lf.err)
		return nil
	}
	return lf
}

func resolveLock(s *schema.Schema) *lockFields {
	lf := &lockFields{}
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
