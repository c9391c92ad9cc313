package repository

import (
	"cmp"
	"slices"

	"github.com/connstore/connstore/models"
	"gorm.io/gorm"
)

// insertInDocumentOrder inserts rows in batches of recordBatch, sorted by
// connector and document (stably: one document's rows keep their order,
// their record order), and writes what the INSERT wrote back (the
// plugin's incarnation) into rows in their own order. On PostgreSQL each
// row of a document of an ordered connector takes a lock of its document
// (migration 0020's trigger); two batches that take their documents in one
// order cannot wait for each other, where batches taking them in input
// order could deadlock.
func insertInDocumentOrder(db *gorm.DB, rows []models.Operation) error {
	perm := make([]int, len(rows))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		ra, rb := &rows[a], &rows[b]
		return cmp.Or(cmp.Compare(ra.ConnectorName, rb.ConnectorName), cmpDoc(ra.DocumentID, rb.DocumentID))
	})
	sorted := make([]models.Operation, len(rows))
	for j, i := range perm {
		sorted[j] = rows[i]
	}
	if err := db.CreateInBatches(&sorted, recordBatch).Error; err != nil {
		return err
	}
	for j, i := range perm {
		rows[i] = sorted[j]
	}
	return nil
}

// cmpDoc orders document ids, none first.
func cmpDoc(a, b *string) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}
