package dashboard

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/connstore/connstore/models"
)

// maxParam is the longest text a query parameter may carry (the
// repository's keys are at most a few hundred bytes).
const maxParam = 1024

// text reads a text parameter: valid UTF-8, at most maxParam bytes.
func text(q url.Values, name string) (string, error) {
	v := q.Get(name)
	if len(v) > maxParam || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return "", badf("parameter %s: at most %d bytes of UTF-8 without NUL", name, maxParam)
	}
	return v, nil
}

// limit reads the page size: 1..MaxPageSize, defaultPageSize when absent.
func limit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, badf("parameter limit: a whole number from 1 to %d", MaxPageSize)
	}
	return n, nil
}

// integer reads an optional int64 parameter (0 when absent).
func integer(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badf("parameter %s: a whole number", name)
	}
	return n, nil
}

// state reads the listing's state: one of the operation states, or
// "overdue"; attempted when absent.
func state(q url.Values) (string, error) {
	switch v := q.Get("state"); v {
	case "":
		return models.OperationAttempted, nil
	case models.OperationAttempted, models.OperationCommitted, models.OperationDead, models.OperationReconcileOnly, "overdue":
		return v, nil
	default:
		return "", badf("parameter state: one of attempted, overdue, dead, reconcile_only, committed")
	}
}

// texts reads several text parameters at once.
func texts(q url.Values, names ...string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, n := range names {
		v, err := text(q, n)
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}
