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
	q := strings.TrimLeft(query, " \t\r\n(")
	// Comments, of either kind, in any order, each followed by blanks.
	for skipped := true; skipped; {
		skipped = false
		for _, c := range [][2]string{{"--", "\n"}, {"/*", "*/"}} {
			if strings.HasPrefix(q, c[0]) {
				_, rest, ok := strings.Cut(q, c[1])
				if !ok {
					return other
				}
				q, skipped = strings.TrimLeft(rest, " \t\r\n("), true
			}
		}
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
