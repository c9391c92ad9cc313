package models

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMalformedJSON is returned when a JSON column or value is not valid JSON.
var ErrMalformedJSON = errors.New("connstore: malformed JSON")

// JSON is a nullable JSON document stored in a text column. The zero value
// is SQL NULL; a non-nil JSON always holds one valid, compact document.
type JSON []byte

// NewJSON encodes v; a nil v yields the NULL JSON.
func NewJSON(v any) (JSON, error) {
	if v == nil {
		return nil, nil
	}
	if j, ok := v.(JSON); ok {
		if j.IsNull() {
			return nil, nil
		}
		return ParseJSON(j)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %T: %v", ErrMalformedJSON, v, err)
	}
	return JSON(raw), nil
}

// ParseJSON validates and compacts raw. Empty input is malformed, as it is
// for JSON.parse; the literal null yields the NULL JSON.
func ParseJSON(raw []byte) (JSON, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedJSON, err)
	}
	if bytes.Equal(buf.Bytes(), []byte("null")) {
		return nil, nil
	}
	return JSON(buf.Bytes()), nil
}

// IsNull reports whether j is SQL NULL (no document).
func (j JSON) IsNull() bool { return len(j) == 0 }

// Decode unmarshals the document into v; a NULL JSON leaves v untouched.
func (j JSON) Decode(v any) error {
	if j.IsNull() {
		return nil
	}
	if err := json.Unmarshal(j, v); err != nil {
		return fmt.Errorf("%w: decode into %T: %v", ErrMalformedJSON, v, err)
	}
	return nil
}

// String returns the encoded document, or "null".
func (j JSON) String() string {
	if j.IsNull() {
		return "null"
	}
	return string(j)
}

// Value writes the document as text, or NULL.
func (j JSON) Value() (driver.Value, error) {
	if j.IsNull() {
		return nil, nil
	}
	return string(j), nil
}

// Scan accepts NULL, text, bytes, or an already-decoded value (some drivers
// and plugins parse JSON columns before the model sees them), mirroring the
// seed's decodeJSONColumn. Malformed text is an error, never a silent NULL.
func (j *JSON) Scan(src any) error {
	var (
		parsed JSON
		err    error
	)
	switch v := src.(type) {
	case nil:
	case string:
		parsed, err = ParseJSON([]byte(v))
	case []byte:
		parsed, err = ParseJSON(v)
	default:
		parsed, err = NewJSON(v)
	}
	if err != nil {
		return err
	}
	*j = parsed
	return nil
}

// MarshalJSON emits the document itself (or null) when j is nested in JSON.
func (j JSON) MarshalJSON() ([]byte, error) {
	if j.IsNull() {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON stores a copy of the nested document.
func (j *JSON) UnmarshalJSON(raw []byte) error {
	parsed, err := ParseJSON(raw)
	if err != nil {
		return err
	}
	*j = parsed
	return nil
}

// GormDataType declares the column as text, as the seed's schema does.
func (JSON) GormDataType() string { return "text" }
