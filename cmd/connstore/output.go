package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table is what a command prints: v as JSON with -json, else the header
// and rows aligned in columns.
type table struct {
	v      any
	header []string
	rows   [][]string
}

func (c *cli) print(t table) error {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(t.v)
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	lines := append([][]string{t.header}, t.rows...)
	for _, row := range lines {
		if _, err := w.Write([]byte(strings.Join(row, "\t") + "\n")); err != nil {
			return err
		}
	}
	return w.Flush()
}

// message prints one result line, or {"result": …} with -json.
func (c *cli) message(v any, text string) error {
	if c.json {
		return c.print(table{v: v})
	}
	_, err := c.stdout.Write([]byte(text + "\n"))
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func str(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func num(p *int64) string {
	if p == nil {
		return "-"
	}
	return itoa(*p)
}

// millis renders an epoch-millisecond time as RFC 3339 (UTC).
func millis(p *int64) string {
	if p == nil {
		return "-"
	}
	return time.UnixMilli(*p).UTC().Format(time.RFC3339)
}

// splitList parses a comma-separated flag value; empty is nil.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
