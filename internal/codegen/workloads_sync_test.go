package codegen_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// TestWorkloadsGenerated checks that every declaration in pkg/proto's
// workloads_gen_test.go is, byte for byte, one hatgen emits today for
// pkg/proto/testdata/workloads.thrift: pkg/proto's benchmarks must measure the
// code generated structs really run, not a hand-tuned imitation. It lives
// here, not beside the benchmarks, because pkg/ never imports internal/.
func TestWorkloadsGenerated(t *testing.T) {
	const protoDir = "../../pkg/proto"
	prog, _, err := idl.Load(filepath.Join(protoDir, "testdata", "workloads.thrift"), nil)
	require.NoError(t, err)
	files, err := codegen.Generate(prog)
	require.NoError(t, err)
	generated := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".go") {
			for name, src := range topDecls(t, f.Path, f.Content) {
				generated[name] = src
			}
		}
	}
	ours, err := os.ReadFile(filepath.Join(protoDir, "workloads_gen_test.go"))
	require.NoError(t, err)
	decls := topDecls(t, "workloads_gen_test.go", ours)
	require.Len(t, decls, 20, "4 types with 4 methods each")
	for name, src := range decls {
		require.Equal(t, generated[name], src, "%s differs from hatgen output", name)
	}
}

// topDecls maps each type and method declaration of a Go file to its source.
func topDecls(t *testing.T, path string, src []byte) map[string]string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	require.NoError(t, err)
	out := map[string]string{}
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil {
				recv := d.Recv.List[0].Type.(*ast.StarExpr).X.(*ast.Ident).Name
				out[recv+"."+d.Name.Name] = text(d)
			}
		case *ast.GenDecl:
			if d.Tok == token.TYPE {
				out[d.Specs[0].(*ast.TypeSpec).Name.Name] = text(d)
			}
		}
	}
	return out
}
