package models

import (
	"database/sql/driver"
	"fmt"
	"log/slog"
)

// redacted is what a Secret prints as, wherever it is printed.
const redacted = "[redacted]"

// Secret is a text column that must never reach an error, a log line or a
// String(): every format verb, JSON and slog print it as [redacted]. Reveal
// returns the value for the one place that needs it.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer, for %#v.
func (Secret) GoString() string { return redacted }

// Format implements fmt.Formatter, so no verb (%s, %q, %x, %v) prints it.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON keeps the secret out of JSON.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Value writes the secret's text.
func (s Secret) Value() (driver.Value, error) { return string(s), nil }

// Scan reads the secret's text.
func (s *Secret) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*s = Secret(v)
	case []byte:
		*s = Secret(v)
	default:
		return fmt.Errorf("connstore: cannot scan %T into a secret", src)
	}
	return nil
}

// GormDataType declares the column as text.
func (Secret) GormDataType() string { return "text" }
