package sqliteconn

import "strings"

// kind is what a statement does to the write lock.
type kind int

const (
	// reads never take the write lock: in WAL mode they run beside the
	// writer.
	reads kind = iota
	// changesRows is INSERT, UPDATE, DELETE, REPLACE or a WITH statement
	// (which may be any of them): outside a transaction it runs inside
	// BEGIN IMMEDIATE … COMMIT, so a lock held by another process is met at
	// BEGIN, where waiting and retrying are safe, and never in the middle of
	// a statement whose rows the caller is reading (UPDATE … RETURNING).
	changesRows
	// other statements (DDL, PRAGMA, BEGIN, VACUUM, ATTACH) take the write
	// slot but run as given: some of them cannot run inside a transaction.
	other
)

// classify reads a statement's leading keyword, after blanks, comments and
// opening parentheses. Anything it does not know is treated as a write:
// taking the slot for a read costs a little concurrency, the reverse would
// cost "database is locked".
func classify(query string) kind {
	q := query
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return other
			}
			q = q[i+1:]
			continue
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return other
			}
			q = q[i+2:]
			continue
		}
		break
	}
	end := strings.IndexFunc(q, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') })
	if end < 0 {
		end = len(q)
	}
	switch strings.ToUpper(q[:end]) {
	case "SELECT", "EXPLAIN", "VALUES":
		return reads
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH":
		return changesRows
	}
	return other
}
