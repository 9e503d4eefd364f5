//go:build cgo && linux

package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// TestLaneMeterHistogram: a lane meter's durations, merged into a family
// child at scrape time, land in the buckets, count and sum a prometheus
// histogram fed the same durations has, on the bucket edges too.
func TestLaneMeterHistogram(t *testing.T) {
	durs := edgeDurations(0, 4*time.Microsecond, 5*time.Microsecond, 5*time.Microsecond+1,
		12500*time.Nanosecond, time.Millisecond, 30*time.Second, time.Hour)
	reg := prometheus.NewRegistry()
	var ms laneMeters
	met := newMetrics(reg, ms.snapshot)
	m := &method{svc: "S", m: &Method{Name: "f"}}
	lm := ms.add(trOf(hints.TransportSHM), laneEngine{})
	want := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "want", Buckets: DurationBuckets})
	for i, d := range durs {
		lm.begin(m, 10, 30)
		lm.end(m, d, i%2 == 0, 20, 40, int(rdma.ProtoEager))
		want.Observe(d.Seconds())
	}
	_ = met
	var w dto.Metric
	require.NoError(t, want.Write(&w))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := family(t, mfs, "hatrpc_server_call_duration_seconds")
	require.Len(t, got.GetMetric(), 1)
	h := got.GetMetric()[0].GetHistogram()
	require.Equal(t, w.GetHistogram().GetSampleCount(), h.GetSampleCount())
	require.InDelta(t, w.GetHistogram().GetSampleSum(), h.GetSampleSum(), 1e-9)
	require.Len(t, h.GetBucket(), len(w.GetHistogram().GetBucket()))
	for i, b := range w.GetHistogram().GetBucket() {
		require.Equal(t, b.GetUpperBound(), h.GetBucket()[i].GetUpperBound())
		require.Equal(t, b.GetCumulativeCount(), h.GetBucket()[i].GetCumulativeCount(), "bucket %g", b.GetUpperBound())
	}
}

// TestLaneMetersAddToChildren: the lanes' counts are added to a family's
// own child of the same labels (a call over FLOCK or before the meter
// counts there), stay once a lane closed, and a scrape never sees one
// series twice; in_flight counts a call begun and not ended.
func TestLaneMetersAddToChildren(t *testing.T) {
	reg := prometheus.NewRegistry()
	var ms laneMeters
	met := newMetrics(reg, ms.snapshot)
	m := &method{svc: "S", m: &Method{Name: "f"}}
	st := met.forMethod("S", "f", TransportSHM)
	st.calls.Add(3) // three calls counted on the child
	st.ok.Add(3)
	a, b := ms.add(trOf(hints.TransportSHM), laneEngine{}), ms.add(trOf(hints.TransportSHM), laneEngine{})
	for range 4 {
		a.begin(m, 10, 30)
		a.end(m, time.Microsecond, true, 20, 40, int(rdma.ProtoEager))
	}
	b.begin(m, 10, 30) // in flight
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		return sumOf(family(t, mfs, name), labels)
	}
	shm := map[string]string{"transport": TransportSHM}
	require.Equal(t, 8.0, value("hatrpc_server_calls_total", shm))
	require.Equal(t, 7.0, value("hatrpc_server_handled_total", map[string]string{"outcome": "ok"}))
	require.Equal(t, 1.0, value("hatrpc_server_in_flight", shm))
	require.Equal(t, 50.0, value("hatrpc_server_request_bytes_total", shm))
	require.Equal(t, 80.0, value("hatrpc_server_reply_bytes_total", shm))
	require.Equal(t, 150.0, value("hatrpc_server_bytes_in_total", shm))
	require.Equal(t, 160.0, value("hatrpc_server_bytes_out_total", shm))
	require.Equal(t, 4.0, value("hatrpc_server_lane_replies_total", map[string]string{"protocol": rdma.ProtoEager.String()}))

	ms.retire(a)
	b.end(m, time.Microsecond, false, 0, 0, 0) // ended without a reply (failed)
	ms.retire(b)
	ms.retire(b) // twice is harmless
	require.Equal(t, 8.0, value("hatrpc_server_calls_total", shm))
	require.Equal(t, 0.0, value("hatrpc_server_in_flight", shm))
	require.Equal(t, 7.0, value("hatrpc_server_handled_total", map[string]string{"outcome": "ok"}))
	require.Equal(t, 5.0, value("hatrpc_server_call_duration_seconds", shm))
}
