package scopes

import (
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// After pages by keyset: rows whose (columns...) tuple sorts after values,
// ordered by the same columns. With no values it is the first page. An index
// whose trailing columns are these makes every page an index range scan.
func After(columns []string, values []any) Scope {
	return func(db *gorm.DB) *gorm.DB {
		order := make([]clause.OrderByColumn, len(columns))
		for i, c := range columns {
			order[i] = clause.OrderByColumn{Column: col(c)}
		}
		db = db.Order(clause.OrderBy{Columns: order})
		if len(values) == 0 {
			return db
		}
		quoted := make([]string, len(columns))
		for i, c := range columns {
			quoted[i] = db.Statement.Quote(c)
		}
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", ")
		return db.Where("("+strings.Join(quoted, ", ")+") > ("+marks+")", values...)
	}
}
