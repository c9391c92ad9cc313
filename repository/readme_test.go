package repository_test

import (
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeBlocksCompile: every Go block of the README compiles exactly as
// written. Each block is a whole file (package clause, imports, code); it is
// written into a scratch package of its own inside this module and the go
// tool vets them all at once, so a block with a dangling brace, an elided
// declaration or an outdated call fails here, naming the block.
func TestReadmeBlocksCompile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks)
	// Scratch packages go under a directory whose name starts with '_':
	// ./... never matches it, so a go test ./... running beside this one
	// cannot pick them up. Blocks that import otelconnstore compile in its
	// module, the rest in this one.
	roots := map[string][]string{}
	scratch := map[string]string{}
	for i, b := range blocks {
		src := b[1]
		require.True(t, strings.HasPrefix(src, "package "), "README block %d is not a whole file:\n%s", i+1, src)
		formatted, err := format.Source([]byte(src))
		require.NoError(t, err, "README block %d does not parse", i+1)
		require.Equal(t, string(formatted), src, "README block %d is not gofmt-formatted", i+1)
		module := ".."
		if strings.Contains(src, `"github.com/connstore/connstore/otelconnstore"`) {
			module = "../otelconnstore"
		}
		if scratch[module] == "" {
			dir, err := os.MkdirTemp(module, "_readme")
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			scratch[module] = dir
		}
		dir := filepath.Join(scratch[module], fmt.Sprintf("block%02d", i+1))
		require.NoError(t, os.Mkdir(dir, 0o755))
		name := "block.go"
		if strings.Contains(src, "\nfunc Test") {
			name = "block_test.go"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
		roots[module] = append(roots[module], "./"+filepath.Base(scratch[module])+"/"+filepath.Base(dir))
	}
	for module, dirs := range roots {
		cmd := exec.Command("go", append([]string{"vet"}, dirs...)...)
		cmd.Dir = module
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "README blocks do not compile (%s):\n%s", module, out)
	}
}
