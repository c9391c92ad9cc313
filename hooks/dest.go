package hooks

import (
	"reflect"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// sameDest reports whether the statement writes the model itself (Save,
// Updates(&model)), whose loaded lock fields gorm reads back into the SET.
func sameDest(stmt *gorm.Statement) bool {
	d, m := reflect.ValueOf(stmt.Dest), reflect.ValueOf(stmt.Model)
	return d.Kind() == reflect.Pointer && m.Kind() == reflect.Pointer && d.Pointer() == m.Pointer()
}

// destToMap makes the SET list a column map without the lock columns: a
// struct cannot carry "version = version + 1", and a struct or map naming
// the lock columns would rewind them. It reports false for a Dest it cannot
// read. Fields a struct would set (selected, or non-zero when nothing is
// selected) are kept; gorm still applies Select and Omit to the map.
func destToMap(stmt *gorm.Statement, lf *lockFields) bool {
	if m, ok := stmt.Dest.(map[string]any); ok {
		for k := range m {
			if lf.isLockColumn(k) {
				delete(m, k)
			}
		}
		return true
	}
	dv := reflect.Indirect(reflect.ValueOf(stmt.Dest))
	if dv.Kind() != reflect.Struct {
		return false
	}
	ds := stmt.Schema
	if dv.Type() != stmt.Schema.ModelType {
		var err error
		if ds, err = schema.Parse(stmt.Dest, &sync.Map{}, stmt.DB.NamingStrategy); err != nil {
			return false
		}
	}
	selected, _ := stmt.SelectAndOmitColumns(false, true)
	out := make(map[string]any, len(ds.Fields))
	for _, f := range ds.Fields {
		if f.DBName == "" || f.PrimaryKey || !f.Updatable || f.AutoUpdateTime > 0 || lf.isLockColumn(f.DBName) {
			continue
		}
		v, zero := f.ValueOf(stmt.Context, dv)
		if sel, ok := selected[f.DBName]; (ok && sel) || (!ok && !zero) {
			out[f.DBName] = v
		}
	}
	stmt.Dest = out
	return true
}

// keepSelected keeps a column the plugin sets in an explicit Select list.
func keepSelected(stmt *gorm.Statement, name string) {
	if len(stmt.Selects) == 0 {
		return
	}
	for _, s := range stmt.Selects {
		if s == "*" || s == name {
			return
		}
	}
	stmt.Selects = append(stmt.Selects, name)
}
