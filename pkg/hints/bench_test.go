package hints

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sinkPlan Plan

// TableFor evaluates the design space once per row: a cell allocates
// nothing.
func TestPlanAtDoesNotAllocate(t *testing.T) {
	s := Set{PerfGoal: Throughput, Concurrency: 64, App: map[string]string{"kv.sync": "nosync"}}
	allocs := testing.AllocsPerRun(100, func() { sinkPlan = planFor(s, 8, 128<<10) })
	assert.Zero(t, allocs)
}

func BenchmarkPlanAt(b *testing.B) {
	s := Set{PerfGoal: Throughput, Concurrency: 64}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkPlan = planFor(s, 8, 512+(i&1)*(128<<10))
	}
}

func BenchmarkServiceFunction(b *testing.B) {
	svc := Service{Name: "S"}
	for i := range 16 {
		svc.Functions = append(svc.Functions, Function{Name: fmt.Sprintf("fn%02d", i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if svc.Function("fn15") == nil {
			b.Fatal("missing")
		}
	}
}

func benchService() ([]RawGroup, []RawFunction) {
	svc := []RawGroup{
		grp(RawShared, 1, id(1, 1, "perf_goal", "throughput"), num(1, 2, "concurrency", "128"), id(1, 3, "kv.sync", "nosync")),
		grp(RawServer, 2, id(2, 1, "polling", "event")),
	}
	var funcs []RawFunction
	for i := range 16 {
		funcs = append(funcs, RawFunction{Name: fmt.Sprintf("fn%02d", i), Groups: []RawGroup{
			grp(RawShared, 10+i, ent(10+i, 1, "payload_size", "4KB", ValueSize)),
			grp(RawClient, 10+i, id(10+i, 2, "proto", "direct_write_imm"), ent(10+i, 3, "timeout", "2ms", ValueSize)),
		}})
	}
	return svc, funcs
}

func BenchmarkResolve16Functions(b *testing.B) {
	svc, funcs := benchService()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve("S", svc, funcs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGoLiteral(b *testing.B) {
	svc, funcs := benchService()
	res, err := Resolve("S", svc, funcs)
	require.NoError(b, err)
	s := res.Functions[0].Client.Set
	b.ReportAllocs()
	for b.Loop() {
		_ = GoLiteral(s)
	}
}

func BenchmarkParseSize(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSize("128KiB"); err != nil {
			b.Fatal(err)
		}
	}
}
