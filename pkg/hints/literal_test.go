package hints_test

import (
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// goldenLiterals is written the way GoLiteral must render each element. The
// test reads this file's own source and compares every element's text with
// GoLiteral of the compiled value, which proves at once that the rendering
// compiles, is gofmt-clean and evaluates back to the same Set.
// The slice is []any so that `gofmt -s` keeps the explicit element types.
var goldenLiterals = []any{
	hints.Set{},
	hints.Set{PerfGoal: hints.Throughput},
	hints.Set{PerfGoal: hints.ResUtil, Concurrency: 128, PayloadSize: 1024},
	hints.Set{Polling: hints.PollEvent, Protocol: hints.ProtoDirectWriteIMM, Transport: hints.TransportRDMA},
	hints.Set{Protocol: hints.ProtoRFP, RFPRetries: 3, RFPFetchSize: 512},
	hints.Set{NUMA: hints.NUMANIC},
	hints.Set{NUMA: hints.NUMANode(0)},
	hints.Set{NUMA: hints.NUMANode(1), QPSharing: hints.SwitchOn, Credits: 16},
	hints.Set{Batch: hints.BatchAuto, BatchAlpha: 0.05, LatencyLimit: 50 * hints.Microsecond},
	hints.Set{Batch: 8, BatchBytes: 2048, BatchTimeout: 5 * hints.Millisecond},
	hints.Set{InlineThreshold: hints.InlineDisabled, EagerThreshold: 8192, SignalInterval: 32},
	hints.Set{InlineThreshold: 64, Timeout: 2 * hints.Second},
	hints.Set{Timeout: 1500 * hints.Microsecond},
	hints.Set{Timeout: 7 * hints.Nanosecond},
	hints.Set{Concurrency: 64, BorrowArgs: true},
	hints.Set{Concurrency: 8, NeverBlocks: true},
	hints.Set{Idempotent: true, Retries: 3},
	hints.Set{Idempotent: true, Retries: hints.NoRetries},
	hints.Set{Idempotent: true, Hedge: 10 * hints.Millisecond},
	hints.Set{QPSharing: hints.SwitchOff, App: map[string]string{"kv.a": "x \"q\"", "kv.sync": "nosync"}},
	hints.Set{PerfGoal: hints.Throughput, Concurrency: 64, PayloadSize: 131072, Polling: hints.PollAdaptive, Protocol: hints.ProtoHybrid, Transport: hints.TransportTCP, NUMA: hints.NUMANode(2), RFPRetries: 5, RFPFetchSize: 256, Batch: hints.BatchAuto, BatchBytes: 4096, BatchTimeout: 1 * hints.Millisecond, BatchAlpha: 0.1, LatencyLimit: 2 * hints.Millisecond, InlineThreshold: 92, EagerThreshold: 4096, SignalInterval: 16, QPSharing: hints.SwitchOn, Credits: 8, Timeout: 3 * hints.Second, BorrowArgs: true, NeverBlocks: true, Idempotent: true, Retries: 5, Hedge: 250 * hints.Microsecond, App: map[string]string{"kv.sync": "nosync"}},
}

func literalSources(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("literal_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "literal_test.go", src, 0)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "goldenLiterals" {
			return true
		}
		for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
			out = append(out, string(src[fset.Position(elt.Pos()).Offset:fset.Position(elt.End()).Offset]))
		}
		return false
	})
	return out
}

func TestGoLiteralGolden(t *testing.T) {
	srcs := literalSources(t)
	require.Len(t, srcs, len(goldenLiterals))
	for i, s := range goldenLiterals {
		assert.Equal(t, srcs[i], hints.GoLiteral(s.(hints.Set)), "element %d", i)
	}
}

func TestGoLiteralGofmtStable(t *testing.T) {
	for _, s := range goldenLiterals {
		code := "package p\n\nvar x = " + hints.GoLiteral(s.(hints.Set)) + "\n"
		got, err := format.Source([]byte(code))
		require.NoError(t, err)
		assert.Equal(t, code, string(got))
	}
}

func TestSetEqualAndDefault(t *testing.T) {
	assert.True(t, hints.Set{}.IsDefault())
	assert.True(t, hints.Set{App: map[string]string{}}.IsDefault(), "empty App equals nil App")
	assert.False(t, hints.Set{Credits: 1}.IsDefault())
	a := hints.Set{App: map[string]string{"kv.a": "1", "kv.b": "2"}}
	b := hints.Set{App: map[string]string{"kv.b": "2", "kv.a": "1"}}
	assert.True(t, a.Equal(b))
	b.App["kv.b"] = "3"
	assert.False(t, a.Equal(b))
}

func TestServiceFunction(t *testing.T) {
	svc := hints.Service{Name: "Calc", Functions: []hints.Function{
		{Name: "add", Client: hints.Set{PerfGoal: hints.Throughput}},
		{Name: "ping"},
	}}
	f := svc.Function("add")
	require.NotNil(t, f)
	assert.Equal(t, hints.Throughput, f.Client.PerfGoal)
	// The pointer aliases the table, so callers can cache it.
	assert.Same(t, &svc.Functions[0], f)
	assert.Nil(t, svc.Function("nope"))
	var nilSvc *hints.Service
	assert.Nil(t, nilSvc.Function("add"))
}
