package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// newCellStats is what Register makes for method m on transport tr.
func newCellStats(met *metrics, m *method, tr uint8) *methodStats {
	st := met.forMethod(m.svc, m.m.Name, transportNames[tr])
	st.key = cellKey{m, tr}
	met.track(st)
	return st
}

// callPath is the per-call metrics work of a TCP call as conn.next,
// execute and handle do it, on connection shard shard.
func callPath(met *metrics, st *methodStats, shard uint32, took time.Duration, o string) {
	met.io(shard).in[ioTCP].Add(40)
	cc := st.cell(shard)
	cc.begin(30)
	cc.end(st, took, o, o == proto.OutcomeOK)
	met.io(shard).out[ioTCP].Add(35)
	st.cell(shard).repBytes.Add(20)
}

// edgeDurations is durs and every bucket edge of DurationBuckets from
// both sides: the meters file by integer nanoseconds, prometheus by float
// seconds, and the two must agree on each edge.
func edgeDurations(durs ...time.Duration) []time.Duration {
	for _, ub := range DurationBuckets {
		d := time.Duration(ub * 1e9)
		durs = append(durs, d-1, d, d+1)
	}
	return durs
}

// TestCallCellsExact: calls of many connections counted at once in the
// shards (more connections than shards, so some share one) show in the
// families exactly as the children fed the same calls would, buckets and
// edges included; a scrape while they run never shows in_flight below
// zero nor a counter going back.
func TestCallCellsExact(t *testing.T) {
	durs := edgeDurations(0, 5*time.Microsecond, 5*time.Microsecond+1, 12500*time.Nanosecond, time.Millisecond, time.Hour)
	reg := prometheus.NewRegistry()
	var ms laneMeters
	met := newMetrics(reg, ms.snapshot)
	m := &method{svc: "S", m: &Method{Name: "f"}}
	st := newCellStats(met, m, trTCP)
	want := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "want", Buckets: DurationBuckets})
	for _, d := range durs {
		want.Observe(d.Seconds()) // every connection files each duration once
	}

	conns := 3 * met.shards
	const rounds = 20 // of durs each
	value := func(mfs []*dto.MetricFamily, name string, labels map[string]string) float64 {
		for _, mf := range mfs {
			if mf.GetName() == name {
				return sumOf(mf, labels)
			}
		}
		return 0
	}
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		var last float64
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			default:
			}
			mfs, err := reg.Gather()
			if err == nil {
				calls := value(mfs, "hatrpc_server_calls_total", nil)
				in := value(mfs, "hatrpc_server_in_flight", nil)
				switch {
				case in < 0:
					err = fmt.Errorf("in_flight %v", in)
				case calls < last:
					err = fmt.Errorf("calls_total went back from %v to %v", last, calls)
				}
				last = calls
			}
			if err != nil {
				scraped <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for i, d := range durs {
					o := proto.OutcomeOK
					if i == 0 {
						o = "overload"
					}
					callPath(met, st, uint32(c), d, o)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-scraped)

	n := float64(conns * rounds * len(durs))
	failed := float64(conns * rounds)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	tcp := map[string]string{"transport": TransportTCP}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hatrpc_server_calls_total", tcp, n},
		{"hatrpc_server_in_flight", tcp, 0},
		{"hatrpc_server_request_bytes_total", tcp, 30 * n},
		{"hatrpc_server_reply_bytes_total", tcp, 20 * n},
		{"hatrpc_server_bytes_in_total", tcp, 40 * n},
		{"hatrpc_server_bytes_out_total", tcp, 35 * n},
		{"hatrpc_server_handled_total", map[string]string{"outcome": proto.OutcomeOK}, n - failed},
		{"hatrpc_server_handled_total", map[string]string{"outcome": "overload"}, failed},
		{"hatrpc_server_errors_total", map[string]string{"outcome": "overload"}, failed},
		{"hatrpc_server_call_duration_seconds", tcp, n},
	} {
		require.Equal(t, tc.want, value(mfs, tc.name, tc.labels), "%s %v", tc.name, tc.labels)
	}
	var w dto.Metric
	require.NoError(t, want.Write(&w))
	got := family(t, mfs, "hatrpc_server_call_duration_seconds")
	require.Len(t, got.GetMetric(), 1)
	h := got.GetMetric()[0].GetHistogram()
	per := float64(conns * rounds)
	require.InEpsilon(t, w.GetHistogram().GetSampleSum()*per, h.GetSampleSum(), 1e-12)
	require.Len(t, h.GetBucket(), len(w.GetHistogram().GetBucket()))
	for i, b := range w.GetHistogram().GetBucket() {
		require.Equal(t, b.GetUpperBound(), h.GetBucket()[i].GetUpperBound())
		require.Equal(t, b.GetCumulativeCount()*uint64(per), h.GetBucket()[i].GetCumulativeCount(), "bucket %g", b.GetUpperBound())
	}
}

// TestCallCellsInFlight: a call begun and not ended is in in_flight, on
// whichever shard, and the series of a method exist at zero before its
// first call (its children made at registration).
func TestCallCellsInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	var ms laneMeters
	met := newMetrics(reg, ms.snapshot)
	m := &method{svc: "S", m: &Method{Name: "f"}}
	st := newCellStats(met, m, trTCP)
	value := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		return sumOf(family(t, mfs, name), nil)
	}
	for _, name := range []string{"hatrpc_server_calls_total", "hatrpc_server_in_flight", "hatrpc_server_call_duration_seconds"} {
		require.Zero(t, value(name), name)
	}
	a, b := st.cell(1), st.cell(uint32(met.shards)+2)
	a.begin(1)
	b.begin(1)
	b.begin(1)
	require.Equal(t, 3.0, value("hatrpc_server_in_flight"))
	b.end(st, time.Microsecond, proto.OutcomeOK, true)
	require.Equal(t, 2.0, value("hatrpc_server_in_flight"))
	a.end(st, time.Microsecond, proto.OutcomeOK, true)
	b.end(st, time.Microsecond, proto.OutcomeOK, true)
	require.Zero(t, value("hatrpc_server_in_flight"))
	require.Equal(t, 3.0, value("hatrpc_server_calls_total"))
}

// TestCallPathAllocs: counting a call allocates nothing once the method's
// shards exist (made on its first call).
func TestCallPathAllocs(t *testing.T) {
	met := newMetrics(prometheus.NewRegistry(), (&laneMeters{}).snapshot)
	st := newCellStats(met, &method{svc: "S", m: &Method{Name: "f"}}, trTCP)
	callPath(met, st, 1, time.Microsecond, proto.OutcomeOK)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		callPath(met, st, 1, 7*time.Microsecond, proto.OutcomeOK)
	}))
}

// BenchmarkCallMetrics is a TCP call's metric updates, each goroutine a
// connection of its own: children, as the server kept them before (every
// connection on the same children), against cells.
func BenchmarkCallMetrics(b *testing.B) {
	met := newMetrics(prometheus.NewRegistry(), (&laneMeters{}).snapshot)
	st := newCellStats(met, &method{svc: "S", m: &Method{Name: "f"}}, trTCP)
	in, out := met.bytesIn.WithLabelValues(TransportTCP), met.bytesOut.WithLabelValues(TransportTCP)
	const took = 7 * time.Microsecond
	b.Run("children", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				in.Add(40)
				st.calls.Inc()
				st.reqBytes.Add(30)
				st.inflight.Inc()
				st.latency.Observe(took.Seconds())
				st.inflight.Dec()
				st.outcome(proto.OutcomeOK)
				out.Add(35)
				st.repBytes.Add(20)
			}
		})
	})
	b.Run("cells", func(b *testing.B) {
		var seq atomic.Uint32
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			shard := seq.Add(1)
			for pb.Next() {
				callPath(met, st, shard, took, proto.OutcomeOK)
			}
		})
	})
}

// family is the family called name in mfs.
func family(t *testing.T, mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}
