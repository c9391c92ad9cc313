package due

import "context"

// Pages reads a table in keyset pages of size: read returns up to limit
// rows after the key values after (nil: from the start), in key order, and
// cursor gives a row's key values. Each non-empty page is handed to fn; a
// short page is the last. Memory stays bounded by one page whatever the
// table holds. It stops at the first error of read or fn, and when ctx ends
// between pages.
func Pages[T any](ctx context.Context, size int, read func(after []any, limit int) ([]T, error),
	cursor func(*T) []any, fn func([]T) error) error {
	var after []any
	for {
		page, err := read(after, size)
		if err != nil {
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
		if err := ctx.Err(); err != nil {
			return err
		}
		after = cursor(&page[len(page)-1])
	}
}
