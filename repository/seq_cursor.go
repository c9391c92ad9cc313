package repository

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/internal/store"
)

// cursorSeq is the record-order number a listing cursor resumes after: seq
// when the cursor carries it (CursorOf and CursorAfter do), else the
// number of the row the cursor's key names, read by primary key. A cursor
// built by hand from a printed key (the CLI's -after CALLER/OPERATION, or a
// cursor kept from before migration 0019) resumes where that row is. Read
// unscoped: a row's number says nothing of the row, and the page itself is
// read through the repository's scopes. A key that names no row (deleted
// since, by retention or an operator) cannot be placed, and is refused.
func (r *Repository) cursorSeq(ctx context.Context, seq int64, k OperationKey) (int64, error) {
	if seq != 0 {
		return seq, nil
	}
	found, err := store.SeqOf(r.base(ctx), k.CallerDID, k.OperationID)
	switch {
	case err != nil:
		return 0, fmt.Errorf("place cursor %s/%s: %w", k.CallerDID, k.OperationID, err)
	case len(found) == 0:
		return 0, invalid("cursor %s/%s names no operation and carries no seq (CursorOf and CursorAfter set it)",
			k.CallerDID, k.OperationID)
	}
	return found[0], nil
}
