package repository

import (
	"context"

	"github.com/connstore/connstore/internal/due"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// eachPage reads the rows of query in keyset pages of size, ordered by
// columns, handing each page to fn (due.Pages over gorm): memory stays
// bounded by one page and every page is an index range scan. cursor returns
// a row's key values.
func eachPage[T any](ctx context.Context, query func() *gorm.DB, columns []string, size int,
	cursor func(*T) []any, fn func([]T) error) error {
	return due.Pages(ctx, size, func(after []any, limit int) ([]T, error) {
		var page []T
		q := query().Scopes(scopes.After(columns, after)).Limit(limit)
		if ops, ok := any(&page).(*[]models.Operation); ok { // the operation rows' one decoder
			return page, findOps(q, ops)
		}
		return page, q.Find(&page).Error
	}, cursor, fn)
}
