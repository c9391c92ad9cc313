package repository

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/connstore/connstore/models"
)

// MaxKeyLength is the longest key (owner, connector, id, state, …) a call
// accepts, in bytes. Keys are indexed, and PostgreSQL refuses index entries
// much over 2 kB with an error no caller could act on; a bound here fails
// first, clearly, and changes nothing.
const MaxKeyLength = 1024

// requireKeys checks name/value pairs for empty, oversized or unstorable
// (see textError) values.
func requireKeys(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		switch v := pairs[i+1]; {
		case v == "":
			return invalid("%s is empty", pairs[i])
		case len(v) > MaxKeyLength:
			return invalid("%s is %d bytes, over the %d-byte limit", pairs[i], len(v), MaxKeyLength)
		}
		if err := textError(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// textError refuses text that one of the databases cannot store: invalid
// UTF-8, or a NUL byte. PostgreSQL rejects both in a text value (SQLSTATE
// 22021) where SQLite stores them, so without this check the same call
// succeeds on one database and fails on the other with a driver error; with
// it, both refuse it first with ErrInvalidInput and change nothing.
func textError(name, v string) error {
	if fault := textFault(v); fault != "" {
		return invalid("%s %s", name, fault)
	}
	return nil
}

// textFault says what makes v unstorable ("" when nothing does).
func textFault(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// requireText applies textError to every string a value carries: a string,
// a pointer to one, a JSON document, and recursively the exported fields of
// structs and the elements of slices. Every write validates its whole input
// with it, single and batched paths alike, so no field is left out by
// accident when one is added. The faulty field's name (name.Field[i].…) is
// built only for the error: every call of every write walks its input, and
// naming each field it passed was most of the walk's cost.
func requireText(name string, v any) error {
	fault, path := textIn(reflect.ValueOf(v))
	if fault == "" {
		return nil
	}
	slices.Reverse(path)
	return invalid("%s %s", strings.TrimPrefix(name+strings.Join(path, ""), "."), fault)
}

var jsonType = reflect.TypeFor[models.JSON]()

// textIn finds the first unstorable string in v: its fault, and the path to
// it from v, innermost segment first (".Field" or "[i]").
func textIn(v reflect.Value) (fault string, path []string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", nil
		}
		return textIn(v.Elem())
	case reflect.String:
		return textFault(v.String()), nil
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if fault, path := textIn(v.Field(i)); fault != "" {
				if !f.Anonymous { // an embedded struct's fields are named as its own
					path = append(path, "."+f.Name)
				}
				return fault, path
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type() == jsonType {
			return textFault(string(v.Bytes())), nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", nil // raw bytes are not text
		}
		for i := range v.Len() {
			if fault, path := textIn(v.Index(i)); fault != "" {
				return fault, append(path, "["+strconv.Itoa(i)+"]")
			}
		}
	}
	return "", nil
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
		if err := textError("JSON document", string(d)); err != nil {
			return err
		}
		if _, err := models.ParseJSON(d); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
	}
	return nil
}
