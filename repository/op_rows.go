package repository

import (
	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/oprow"
	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
)

// scanOps is db for a statement whose operation rows (a query's, or an
// update's RETURNING) are decoded into dst by oprow, the repository's one
// decoder of operation rows, rather than by gorm's reflective scan. gorm
// still builds and runs the statement through its callbacks (the lock
// plugin, dbresolver, tracing), on the operation model as before; the
// model's slice stays empty, so the lock plugin treats the statement as
// the set-based write or read it always was.
func (r *Repository) scanOps(db *gorm.DB, dst *[]models.Operation) *gorm.DB {
	return hooks.ScanRows(db, oprow.Into(dst)).Model(&[]models.Operation{})
}

// findOps runs q, a query of the operation table, decoding its rows into
// dst with oprow (see scanOps).
func findOps(q *gorm.DB, dst *[]models.Operation) error {
	return hooks.ScanRows(q, oprow.Into(dst)).Model(&models.Operation{}).Find(&[]models.Operation{}).Error
}
