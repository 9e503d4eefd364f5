package hatkv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/test/testenv"
)

// benchRecords is the table size the YCSB benchmarks load once.
const benchRecords = 10000

func benchWorkload(b *testing.B, name string, ops int) *ycsb.Workload {
	b.Helper()
	p := ycsb.NewProperties()
	require.NoError(b, p.LoadWorkload(name))
	p.Set("recordcount", fmt.Sprint(benchRecords))
	p.Set("operationcount", fmt.Sprint(max(ops, 1)))
	cfg, err := ycsb.ParseConfig(p)
	require.NoError(b, err)
	w, err := ycsb.NewWorkload(cfg)
	require.NoError(b, err)
	return w
}

// BenchmarkYCSB runs YCSB A and B and their HatKV variants (half of the
// reads and updates as MultiGet/MultiPut batches of 10, §5.4 of the
// paper) with 1, 8 and 64 client threads, one connection each, over TCP
// and over engine lanes (shm, or RDMA where HATRPC_PROVIDER says so), with the per-function hints of hatkv.thrift and with
// its service-level hints only (the two hint sets of the HatRPC
// evaluation). LMDB runs with kv.sync=nosync, standing in for the paper's
// tmpfs. Reported: ops/s (a multi-operation counts once) and, per
// operation, the average and p99 latency in microseconds.
func BenchmarkYCSB(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Minute))
	defer cancel()
	for _, level := range []string{"function", "service"} {
		var sopts []Option
		var copts []client.Option
		if level == "service" {
			sopts = append(sopts, WithServiceLevelHints())
			copts = append(copts, client.WithServiceLevelHints())
		}
		ts := startServer(b, "", append(sopts, WithSetting("mapsize", "1GiB"))...)
		load := benchWorkload(b, "workloada", 0)
		cl, err := Dial(ctx, ts.addr, WithConns(8))
		require.NoError(b, err)
		rep, err := ycsb.Run(ctx, YCSB{C: cl}, load, ycsb.RunOptions{Threads: 8, Load: true, Seed: 1}, ycsb.NewMeasurements())
		require.NoError(b, err)
		require.NoError(b, cl.Close())
		require.Equal(b, int64(benchRecords), rep.Operations)
		for _, wl := range []string{"workloada", "workloadb", "workloada_hatkv", "workloadb_hatkv"} {
			// "lanes" is transport auto: shm here, RDMA on a node with a NIC
			// (HATRPC_PROVIDER picks), so the benchmark runs unchanged there.
			for _, tr := range []string{"tcp", "lanes"} {
				if level == "service" && tr == "tcp" {
					continue // over TCP the hint level changes nothing
				}
				for _, threads := range []int{1, 8, 64} {
					name := fmt.Sprintf("%s/%s/hints=%s/threads=%d", wl, tr, level, threads)
					b.Run(name, func(b *testing.B) {
						runYCSB(b, ctx, ts.addr, wl, tr, threads, copts)
					})
				}
			}
		}
	}
}

func runYCSB(b *testing.B, ctx context.Context, addr, wl, tr string, threads int, copts []client.Option) {
	if tr == "lanes" {
		tr = "auto"
	}
	w := benchWorkload(b, wl, b.N)
	cl, err := Dial(ctx, addr, WithConns(threads), WithClientTransport(tr), WithClientOptions(copts...))
	require.NoError(b, err)
	defer cl.Close()
	m := ycsb.NewMeasurements()
	b.ResetTimer()
	rep, err := ycsb.Run(ctx, YCSB{C: cl}, w, ycsb.RunOptions{Threads: threads, Operations: int64(b.N), Seed: 2}, m)
	b.StopTimer()
	require.NoError(b, err)
	b.ReportMetric(rep.Throughput, "ops/s")
	for _, s := range rep.Ops {
		require.Zero(b, s.Errors, "failed %s operations", s.Operation)
		b.ReportMetric(s.AvgUs, s.Operation+"-avg-us")
		b.ReportMetric(s.P99Us, s.Operation+"-p99-us")
	}
}
