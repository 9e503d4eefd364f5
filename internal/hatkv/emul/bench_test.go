package emul

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/internal/hatkv/ycsb"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// benchRuns: one thread with both polling modes; 8 and 64 threads (more
// connections than the 2 cores) with event polling only, since a busy
// poller per connection then spends the CPU the others need.
var benchRuns = []struct {
	threads int
	poll    rdma.Polling
}{{1, rdma.PollBusy}, {1, rdma.PollEvent}, {8, rdma.PollEvent}, {64, rdma.PollEvent}}

// benchRecords is the table the YCSB benchmarks load once (small, so the
// whole matrix runs in minutes on a 2-core machine).
const benchRecords = 10000

// benchCap bounds one sub-benchmark: a configuration that collapses
// (busy pollers outnumbering cores) reports what it did in this time.
const benchCap = 10 * time.Second

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

// latDB records every operation's latency (a multi-operation counts once)
// for the overall p50/p99 of a run.
type latDB struct {
	ycsb.DB
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func (l *latDB) rec(start time.Time) {
	d := time.Since(start).Nanoseconds()
	l.mu.Lock()
	_ = l.h.RecordValue(d)
	l.mu.Unlock()
}

func (l *latDB) Read(ctx context.Context, key string, fields []string) (map[string][]byte, error) {
	defer l.rec(time.Now())
	return l.DB.Read(ctx, key, fields)
}

func (l *latDB) Update(ctx context.Context, key string, values map[string][]byte) error {
	defer l.rec(time.Now())
	return l.DB.Update(ctx, key, values)
}

func (l *latDB) MultiRead(ctx context.Context, keys []string, fields []string) ([]map[string][]byte, error) {
	defer l.rec(time.Now())
	return l.DB.MultiRead(ctx, keys, fields)
}

func (l *latDB) MultiUpdate(ctx context.Context, keys []string, values []map[string][]byte) error {
	defer l.rec(time.Now())
	return l.DB.MultiUpdate(ctx, keys, values)
}

// BenchmarkYCSB runs YCSB A and B and their HatKV variants (half of the
// reads and updates as MultiGet/MultiPut batches of 10) through each
// emulation with 1, 8 and 64 client threads, one connection per thread,
// all on one shm device, store and server; both ends of a connection
// poll the same way (benchRuns). LMDB runs
// with nosync. Reported: ops/s (a multi-operation counts once), overall
// p50/p99 and the p50 of single GETs in microseconds, Pilaf's READs and
// fallbacks per GET.
//
//	go test -run '^$' -bench YCSB -benchtime 4000x ./internal/hatkv/emul
func BenchmarkYCSB(b *testing.B) {
	e := newEnv(b, WithIndexCapacity(1<<16), WithValueArea(64<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	dial := func(context.Context) (net.Conn, error) { return e.conn(ctx) }
	load := benchWorkload(b, "workloada", 0)
	pool, err := DialPool(ctx, e.dev, 8, dial, ARGRPC, WithPolling(rdma.PollEvent))
	require.NoError(b, err)
	rep, err := ycsb.Run(ctx, pool, load, ycsb.RunOptions{Threads: 8, Load: true, Seed: 1}, ycsb.NewMeasurements())
	require.NoError(b, err)
	require.NoError(b, pool.Close())
	require.Equal(b, int64(benchRecords), rep.Operations)
	require.Equal(b, benchRecords, e.srv.IndexStats().Keys)

	for _, wl := range []string{"workloada", "workloadb", "workloada_hatkv", "workloadb_hatkv"} {
		for _, run := range benchRuns {
			for _, kind := range Kinds() {
				b.Run(fmt.Sprintf("%s/threads=%d/%v/%v", wl, run.threads, run.poll, kind), func(b *testing.B) {
					threads, poll := run.threads, run.poll
					w := benchWorkload(b, wl, b.N)
					pool, err := DialPool(ctx, e.dev, threads, dial, kind, WithPolling(poll))
					require.NoError(b, err)
					defer pool.Close()
					db := &latDB{DB: pool, h: hdrhistogram.New(100, int64(time.Minute), 3)}
					m := ycsb.NewMeasurements()
					b.ResetTimer()
					rep, err := ycsb.Run(ctx, db, w, ycsb.RunOptions{Threads: threads, Operations: int64(b.N),
						Seed: 2, MaxDuration: benchCap}, m)
					b.StopTimer()
					require.NoError(b, err)
					b.ReportMetric(rep.Throughput, "ops/s")
					b.ReportMetric(float64(db.h.ValueAtQuantile(50))/1e3, "p50-us")
					b.ReportMetric(float64(db.h.ValueAtQuantile(99))/1e3, "p99-us")
					for _, s := range rep.Ops {
						require.Zero(b, s.Errors, "failed %s operations", s.Operation)
						if s.Operation == ycsb.OpRead.String() {
							b.ReportMetric(s.P50Us, "get-p50-us")
						}
					}
					if kind == HERD && poll == rdma.PollBusy {
						// Calls made in RFP fetch mode after a flip back
						// (see endpointConfig): not HERD's WRITE + SEND.
						var fetched uint64
						for _, c := range pool.Clients() {
							st := c.ep.Stats()
							fetched += st.Calls - st.RFPReplyCalls
						}
						b.ReportMetric(float64(fetched)/float64(max(rep.Operations, 1)), "herd-fetch-calls/op")
					}
					if kind == Pilaf {
						var st PilafStats
						for _, c := range pool.Clients() {
							s := c.PilafStats()
							st.Gets, st.Reads, st.Fallbacks = st.Gets+s.Gets, st.Reads+s.Reads, st.Fallbacks+s.Fallbacks
						}
						if st.Gets > 0 {
							b.ReportMetric(float64(st.Reads)/float64(st.Gets), "reads/get")
							b.ReportMetric(float64(st.Fallbacks)/float64(st.Gets), "fallbacks/get")
						}
					}
				})
			}
		}
	}
}
