package migrations

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// MigrationStatus says whether one migration has run on a database.
type MigrationStatus struct {
	// ID is the migration's id, as IDs lists it.
	ID string `json:"id"`
	// Applied is true once the migration has run.
	Applied bool `json:"applied"`
}

// Status lists every migration this version knows, in the order they apply,
// with whether it has run on db; Unknown lists ids the database recorded
// that this version does not know (a newer version migrated it). A
// database never migrated shows every migration pending. It only reads.
func Status(ctx context.Context, db *gorm.DB) (list []MigrationStatus, unknown []string, err error) {
	var applied []string
	tx := db.WithContext(ctx)
	if tx.Migrator().HasTable(TableName) {
		if err := tx.Table(TableName).Order("id").Pluck("id", &applied).Error; err != nil {
			return nil, nil, fmt.Errorf("migration status: %w", err)
		}
	}
	ids := IDs()
	for _, id := range ids {
		list = append(list, MigrationStatus{ID: id, Applied: slices.Contains(applied, id)})
	}
	for _, id := range applied {
		if !slices.Contains(ids, id) {
			unknown = append(unknown, id)
		}
	}
	return list, unknown, nil
}
