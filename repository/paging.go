package repository

import (
	"context"

	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// eachPage reads the rows of query in keyset pages of size, ordered by
// columns, handing each page to fn: memory stays bounded by one page and
// every page is an index range scan. cursor returns a row's key values.
func eachPage[T any](ctx context.Context, query func() *gorm.DB, columns []string, size int,
	cursor func(*T) []any, fn func([]T) error) error {
	var after []any
	for {
		var page []T
		if err := query().Scopes(scopes.After(columns, after)).Limit(size).Find(&page).Error; err != nil {
			return err
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < size {
			return ctx.Err()
		}
		after = cursor(&page[len(page)-1])
	}
}
