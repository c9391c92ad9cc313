package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The one format of every key the CLI prints and reads: FIRST/SECOND
// (CALLER/OPERATION, CONNECTOR/ACCOUNT), each part as it is when it is
// plain, else as a Go double-quoted string. A part is plain when it is
// printable text without white space that does not start with a double
// quote, and for the first part has no slash: the key then splits at its
// first slash. So the usual key prints and reads as it always did
// (did:key:z6Mk…/op-1, an operation id with slashes in it), and any other
// (a tab, a newline, a space, an escape sequence, invalid UTF-8, a caller
// with a slash) still round-trips exactly, one column wide, with no byte
// that would rewrite an operator's terminal. Percent signs stay as they
// are: DIDs carry percent-encoding of their own (did:web:host%3A8080).
// Through a shell, put a printed key in single quotes.

// quotePart is one part of a key as the CLI prints it; first marks the
// part before the separator.
func quotePart(s string, first bool) string {
	plain := s != "" && !strings.HasPrefix(s, `"`) && !strings.ContainsFunc(s, func(r rune) bool {
		return r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) || first && r == '/'
	})
	if plain {
		return s
	}
	// A space stays a space in Go's quoting; \x20 keeps the key one word
	// for a script that splits a table's lines at white space.
	return strings.ReplaceAll(strconv.Quote(s), " ", `\x20`)
}

// formatKey prints the key of first and second.
func formatKey(first, second string) string {
	return quotePart(first, true) + "/" + quotePart(second, false)
}

// parseKey reads a key as formatKey prints it (what names it in errors).
func parseKey(s, what string) (first, second string, err error) {
	first, raw, err := splitKey(s, what)
	if err != nil {
		return "", "", err
	}
	if second, err = readPart(raw); err != nil {
		return "", "", fmt.Errorf("%w: %q is not %s: its quoted second part is not a Go string", errUsage, s, what)
	}
	return first, second, nil
}

// splitKey reads a key's first part and returns the second as printed.
func splitKey(s, what string) (first, rawSecond string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q is not %s: %s", errUsage, s, what, why)
	}
	var rest string
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return bad("its quoted first part does not end")
		}
		first, _ = strconv.Unquote(q)
		if rest = s[len(q):]; !strings.HasPrefix(rest, "/") {
			return bad("no slash after its quoted first part")
		}
		rest = rest[1:]
	} else {
		var ok bool
		if first, rest, ok = strings.Cut(s, "/"); !ok {
			return bad("no slash")
		}
	}
	if first == "" {
		return bad("the first part is empty")
	}
	return first, rest, nil
}

// readPart reads one part printed on its own (quotePart's second form):
// quoted when it starts with a double quote, else as it is.
func readPart(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	return strconv.Unquote(s)
}

// cell is free text (a kind, an error message) as one table cell: control
// characters and runs of white space made one space, so a row stays one
// line and the terminal is not rewritten.
func cell(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r)
	}), " ")
}

// shellQuote puts s in single quotes for a POSIX shell, so a printed
// command line pastes as one argument whatever s holds.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// partFlag is a flag naming one part of a key (a connector, an owner DID),
// read as the tables print it: quoted when it starts with a double quote.
type partFlag string

// String implements flag.Value.
func (p *partFlag) String() string { return string(*p) }

// Set implements flag.Value.
func (p *partFlag) Set(s string) error {
	v, err := readPart(s)
	if err != nil {
		return fmt.Errorf("%q starts with a double quote but is not a Go string", s)
	}
	*p = partFlag(v)
	return nil
}
