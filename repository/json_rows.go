package repository

import (
	"errors"
	"fmt"

	"github.com/connstore/connstore/internal/jsonrows"
)

// jsonTable is the batch's rows as the table v (see jsonrows.Table).
func jsonTable(dialect string, cols []jsonrows.Col, rows [][]any) (sql string, vars []any, err error) {
	return jsonTableAs(dialect, "v", cols, rows)
}

// jsonTableAs is jsonTable under another alias; a string that is not valid
// UTF-8 is ErrInvalidInput, as on every other path.
func jsonTableAs(dialect, alias string, cols []jsonrows.Col, rows [][]any) (sql string, vars []any, err error) {
	sql, vars, err = jsonrows.Table(dialect, alias, cols, rows)
	return sql, vars, invalidText(err)
}

// invalidText makes a row source's refusal of text that is not valid UTF-8
// ErrInvalidInput, as on every other path; other errors pass through.
func invalidText(err error) error {
	if errors.Is(err, jsonrows.ErrInvalidUTF8) {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return err
}
