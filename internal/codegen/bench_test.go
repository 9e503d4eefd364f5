package codegen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/codegen"
	"github.com/hatrpc/hatrpc/pkg/idl"
)

// bigIDL builds an IDL of at least lines lines mixing every construct the
// generator handles.
func bigIDL(lines int) string {
	var b strings.Builder
	b.WriteString("namespace go big\n\n")
	n := 0
	for i := 0; strings.Count(b.String(), "\n") < lines; i++ {
		fmt.Fprintf(&b, "enum E%d {\n  A%d = 1,\n  B%d,\n  C%d = 10\n}\n\n", i, i, i, i)
		fmt.Fprintf(&b, "typedef list<S%d> L%d\n\n", i, i)
		fmt.Fprintf(&b, "struct S%d {\n", i)
		fmt.Fprintf(&b, "  1: required i32 id,\n  2: optional string name,\n  3: list<i64> values,\n")
		fmt.Fprintf(&b, "  4: map<string, E%d> kinds,\n  5: optional binary blob,\n  6: double ratio = 1.5,\n", i)
		fmt.Fprintf(&b, "  7: set<string> tags,\n  8: map<i32, list<string>> nested,\n  9: E%d kind = E%d.B%d,\n  10: bool on,\n", i, i, i)
		if i > 0 {
			fmt.Fprintf(&b, "  11: optional S%d prev,\n  12: L%d prevs,\n", i-1, i-1)
		}
		b.WriteString("}\n\n")
		fmt.Fprintf(&b, "exception X%d {\n  1: string message,\n  2: i32 code,\n}\n\n", i)
		fmt.Fprintf(&b, "const i32 K%d = %d\n\n", i, i)
		if i%5 == 4 {
			fmt.Fprintf(&b, "service Svc%d {\n  hint: perf_goal=throughput;\n", i)
			for j := i - 4; j <= i; j++ {
				fmt.Fprintf(&b, "  S%d get%d(1: i32 id, 2: string name) throws (1: X%d x) [c_hint: payload_size=4KB;],\n", j, j, j)
				fmt.Fprintf(&b, "  oneway void put%d(1: S%d s),\n", j, j)
			}
			b.WriteString("}\n\n")
		}
		n++
	}
	return b.String()
}

func writeBigIDL(tb testing.TB, lines int) string {
	src := bigIDL(lines)
	require.GreaterOrEqual(tb, strings.Count(src, "\n"), lines)
	p := filepath.Join(tb.TempDir(), "big.thrift")
	require.NoError(tb, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// TestBigIDLGenerates keeps the benchmark input honest: the 3,000-line IDL
// loads and generates, and a 300-line cut of the same shapes (vetting the
// full output would take tens of seconds) is vet-clean.
func TestBigIDLGenerates(t *testing.T) {
	for _, lines := range []int{3000, 300} {
		prog, _, err := idl.Load(writeBigIDL(t, lines), nil)
		require.NoError(t, err)
		// The server subpackage imports the types package by its path.
		tmp, err := os.MkdirTemp("testdata", "tmp-big-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(tmp) })
		files, err := codegen.Generate(prog, codegen.WithGoPackage(modulePath+"/"+selfPath+"/"+filepath.ToSlash(tmp)))
		require.NoError(t, err)
		paths := make([]string, len(files))
		for i, f := range files {
			paths[i] = f.Path
		}
		require.Equal(t, []string{"big/big-consts.go", "big/big.go", "big/bigserver/big.go"}, paths)
		if lines > 300 {
			continue
		}
		writeFiles(t, tmp, files)
		vetPackages(t, tmp)
	}
}

// BenchmarkParseResolveGenerate measures hatgen's whole pipeline on a
// 3,000-line IDL; the goal is well under one second per iteration.
func BenchmarkParseResolveGenerate(b *testing.B) {
	path := writeBigIDL(b, 3000)
	b.ReportAllocs()
	for b.Loop() {
		prog, _, err := idl.Load(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := codegen.Generate(prog); err != nil {
			b.Fatal(err)
		}
	}
}
