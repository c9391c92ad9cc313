package repository

import (
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
)

// MaxKeyLength is the longest key (owner, connector, id, state, …) a call
// accepts, in bytes. Keys are indexed, and PostgreSQL refuses index entries
// much over 2 kB with an error no caller could act on; a bound here fails
// first, clearly, and changes nothing.
const MaxKeyLength = 1024

// requireKeys checks name/value pairs for empty or oversized values.
func requireKeys(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		switch v := pairs[i+1]; {
		case v == "":
			return invalid("%s is empty", pairs[i])
		case len(v) > MaxKeyLength:
			return invalid("%s is %d bytes, over the %d-byte limit", pairs[i], len(v), MaxKeyLength)
		}
	}
	return nil
}

// requireLimit rejects a non-positive batch or page size.
func requireLimit(limit int) error {
	if limit <= 0 {
		return invalid("limit %d must be a positive integer", limit)
	}
	return nil
}

// requireTime rejects the zero time and times before the epoch: every
// stored time is a non-negative epoch-millisecond count.
func requireTime(name string, t time.Time) error {
	if t.IsZero() || t.UnixMilli() < 0 {
		return invalid("%s %v is not a valid time", name, t)
	}
	return nil
}

// requireJSON checks that every non-NULL document is valid JSON, so a
// hand-built models.JSON cannot write a column no reader can decode.
func requireJSON(docs ...models.JSON) error {
	for _, d := range docs {
		if d.IsNull() {
			continue
		}
		if _, err := models.ParseJSON(d); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
	}
	return nil
}
