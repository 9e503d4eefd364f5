package idl

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// generateIDL builds a realistic hint-annotated IDL of at least minLines
// lines: enums, typedefs, constants, structs with containers and defaults,
// exceptions and services with service- and function-level hints.
func generateIDL(minLines int) string {
	var b strings.Builder
	lines := func() int { return strings.Count(b.String(), "\n") }
	b.WriteString("namespace go bench\nnamespace * bench\n\n")
	for i := 0; lines() < minLines; i++ {
		fmt.Fprintf(&b, "/** Status values of group %d. */\nenum Status%d {\n", i, i)
		for v := 0; v < 6; v++ {
			fmt.Fprintf(&b, "  S%d_%d = %d,\n", i, v, v*2)
		}
		b.WriteString("}\n\n")
		fmt.Fprintf(&b, "typedef i64 Id%d\ntypedef map<string, list<Id%d>> Index%d\n\n", i, i, i)
		fmt.Fprintf(&b, "const i32 LIMIT_%d = %d\nconst Status%d DEFAULT_%d = Status%d.S%d_2\n", i, 1000+i, i, i, i, i)
		fmt.Fprintf(&b, "const list<string> NAMES_%d = [\"a%d\", \"b%d\", \"c%d\"]\n\n", i, i, i, i)
		fmt.Fprintf(&b, "exception Failure%d {\n  1: i32 code = LIMIT_%d\n  2: string message\n}\n\n", i, i)
		for s := 0; s < 3; s++ {
			fmt.Fprintf(&b, "/** Record %d.%d. */\nstruct Record%d_%d {\n", i, s, i, s)
			fmt.Fprintf(&b, "  1: required Id%d id\n  2: optional string name = \"n\"\n", i)
			fmt.Fprintf(&b, "  3: Status%d status = DEFAULT_%d\n  4: list<Record%d_%d> children\n", i, i, i, (s+1)%3)
			fmt.Fprintf(&b, "  5: map<string, set<i32>> tags (go.tag = \"tags\")\n  6: Index%d index\n", i)
			fmt.Fprintf(&b, "  7: double score = 1.5\n  8: binary blob\n  9: uuid ref\n  10: bool ok = true\n}\n\n")
		}
		fmt.Fprintf(&b, "service Service%d {\n", i)
		fmt.Fprintf(&b, "  hint: perf_goal = latency, concurrency = %d;\n  s_hint: payload = 4KiB;\n  c_hint: polling = busy;\n", i%8+1)
		for f := 0; f < 6; f++ {
			fmt.Fprintf(&b, "  /** Call %d. */\n  Record%d_%d call%d(1: Id%d id, 2: Record%d_%d rec, 3: list<Status%d> st) throws (1: Failure%d err) [hint: payload = %dKB; c_hint: batch = %d],\n",
				f, i, f%3, f, i, i, (f+1)%3, i, i, f+1, f)
		}
		fmt.Fprintf(&b, "  oneway void notify(1: string what)\n}\n\n")
	}
	return b.String()
}

func TestGeneratedIDLLoads(t *testing.T) {
	src := generateIDL(3000)
	require.GreaterOrEqual(t, strings.Count(src, "\n"), 3000)
	p, diags, err := LoadFS(fstest.MapFS{"bench.thrift": &fstest.MapFile{Data: []byte(src)}}, "bench.thrift", nil)
	require.NoError(t, err)
	assert.Empty(t, diags.Warnings)
	assert.GreaterOrEqual(t, len(p.Structs), 80)
	assert.GreaterOrEqual(t, len(p.Services), 20)
	svc := p.Services[0]
	require.Len(t, svc.Hints, 3)
	require.Len(t, svc.Functions, 7)
	assert.Equal(t, "1KB", svc.Functions[0].Hints[0].Entries[0].Value)
	assertFullyResolved(t, p)
}

// BenchmarkLoad3000Lines measures lex + parse + resolve + check of a
// generated ~3,000-line IDL; the goal is well under one second per op.
func BenchmarkLoad3000Lines(b *testing.B) {
	src := []byte(generateIDL(3000))
	fsys := fstest.MapFS{"bench.thrift": &fstest.MapFile{Data: src}}
	thriftParser() // building the grammar is a one-off cost, not part of a load
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := LoadFS(fsys, "bench.thrift", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLex isolates the hand-written lexer.
func BenchmarkLex(b *testing.B) {
	src := generateIDL(3000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := lex("bench.thrift", src); err != nil {
			b.Fatal(err)
		}
	}
}
