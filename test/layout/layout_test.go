// Package layout_test checks the repository's package layout rules
// (README "Layout"): nothing under pkg/ imports the module's internal/
// packages, its tests included, in either build (with and without cgo), and the Thrift stream
// detection exists once.
package layout_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mod = "github.com/hatrpc/hatrpc/"

func TestPkgImportsNoInternal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cgo := range []string{"0", "1"} {
		cmd := exec.CommandContext(ctx, "go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, mod+"pkg/...")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Greater(t, len(lines), 10, "go list found too few packages")
		for _, l := range lines {
			f := strings.Fields(l)
			for _, imp := range f[1:] {
				assert.False(t, strings.HasPrefix(imp, mod+"internal/"), "CGO_ENABLED=%s: %s imports %s", cgo, f[0], imp)
			}
		}
	}
}

// TestOneDetect: one package-level func Detect in the module's Go code.
func TestOneDetect(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var found []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "Detect" {
				rel, _ := filepath.Rel(root, p)
				found = append(found, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"pkg/wire/stream.go"}, found)
}
