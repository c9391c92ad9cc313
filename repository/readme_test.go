package repository_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exampleSources are the files whose Example functions (and, for
// connstoretest, test) the README quotes.
var exampleSources = []string{"example_test.go", "../hooks/example_test.go", "../otelconnstore/example_test.go",
	"../worker/example_test.go", "../connstoretest/readme_test.go"}

// TestReadmeSnippetsAreExamples: every Go snippet of the README is an
// excerpt (its lines, in order) of one compiled, executed example.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var sources [][]string
	for _, f := range exampleSources {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sources = append(sources, trimmedLines(string(b)))
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		snippet := trimmedLines(b[1])
		found := false
		for _, src := range sources {
			found = found || isSubsequence(snippet, src)
		}
		require.True(t, found, "README snippet is not an excerpt of an example:\n%s", b[1])
	}
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// isSubsequence reports whether want's lines occur in have in order.
func isSubsequence(want, have []string) bool {
	i := 0
	for _, l := range have {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	return i == len(want)
}
