package migrations

import (
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
)

// A database created by another implementation of the store (the
// TypeScript @kubun/store-connector's own migrations) already holds the
// kubun_connector_* tables, with no record of connstore's migrations. A
// table migration that finds its tables adopts them instead of creating
// them: it adds the columns and indexes the frozen DDL has and the table
// lacks, widens 32-bit integer columns the DDL declares BIGINT (PostgreSQL),
// and keeps every row. gormigrate then records the migration as applied, so
// the next run is a no-op.

var (
	createTable = regexp.MustCompile(`(?s)^\s*CREATE TABLE (\w+) \((.*)\)\s*$`)
	constraint  = regexp.MustCompile(`(?s)CONSTRAINT (\w+)\s+UNIQUE \(([^)]*)\)`)
)

// column is one column definition of a CREATE TABLE.
type column struct{ name, def string }

// parseCreateTable returns the table, its column definitions and its
// UNIQUE constraints (name → column list) of a CREATE TABLE statement.
func parseCreateTable(stmt string) (table string, cols []column, uniques map[string]string) {
	m := createTable.FindStringSubmatch(stmt)
	if m == nil {
		return "", nil, nil
	}
	uniques = map[string]string{}
	for _, u := range constraint.FindAllStringSubmatch(m[2], -1) {
		uniques[u[1]] = u[2]
	}
	for _, line := range strings.Split(m[2], "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), ",")
		if line == "" || strings.HasPrefix(line, "--") || strings.HasPrefix(line, "CONSTRAINT") ||
			strings.HasPrefix(line, "PRIMARY KEY") || strings.HasPrefix(line, "UNIQUE") {
			continue
		}
		name := strings.Trim(strings.Fields(line)[0], `"`)
		cols = append(cols, column{name: name, def: line})
	}
	return m[1], cols, uniques
}

// adopt brings existing tables up to ddl without dropping anything.
func adopt(tx *gorm.DB, ddl []string) error {
	for _, stmt := range ddl {
		table, cols, uniques := parseCreateTable(stmt)
		if table == "" { // an index: create it where it is missing
			if err := tx.Exec(strings.Replace(stmt, "CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)).Error; err != nil {
				return err
			}
			continue
		}
		if err := adoptColumns(tx, table, cols); err != nil {
			return fmt.Errorf("adopt %s: %w", table, err)
		}
		for name, on := range uniques {
			err := tx.Exec(fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s)", name, table, on)).Error
			if err != nil {
				return fmt.Errorf("adopt %s: %w", table, err)
			}
		}
	}
	return nil
}

// adoptColumns adds missing columns and widens narrow integers.
func adoptColumns(tx *gorm.DB, table string, cols []column) error {
	types, err := tx.Migrator().ColumnTypes(table)
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, ct := range types {
		have[ct.Name()] = strings.ToUpper(ct.DatabaseTypeName())
	}
	for _, c := range cols {
		got, ok := have[c.name]
		switch {
		case !ok:
			err = tx.Exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s", table, c.def)).Error
		case tx.Dialector.Name() == "postgres" && strings.Contains(c.def, "BIGINT") && (got == "INT4" || got == "INT2"):
			err = tx.Exec(fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN "%s" TYPE BIGINT`, table, c.name)).Error
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tablesExist reports whether every table is there already.
func tablesExist(tx *gorm.DB, tables []string) bool {
	for _, t := range tables {
		if !tx.Migrator().HasTable(t) {
			return false
		}
	}
	return true
}
