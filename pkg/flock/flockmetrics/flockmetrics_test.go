package flockmetrics_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/flock"
	"github.com/hatrpc/hatrpc/pkg/flock/flockmetrics"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/test/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// family is what Prometheus shows of one metric.
type family struct {
	typ    dto.MetricType
	help   string
	labels []string
}

// want are the flock_* series as pkg/flock exported them when it held
// Prometheus metrics itself: operators' dashboards and alerts use these.
var want = map[string]family{
	"flock_coalescing_degree":        {dto.MetricType_HISTOGRAM, "Requests or responses per posted message.", []string{"side"}},
	"flock_credits_granted_total":    {dto.MetricType_COUNTER, "Credit renewals the QP scheduler granted.", nil},
	"flock_credits_declined_total":   {dto.MetricType_COUNTER, "Credit renewals declined (QP deactivated).", nil},
	"flock_active_qps":               {dto.MetricType_GAUGE, "Active QPs per sender.", []string{"peer"}},
	"flock_migrations_total":         {dto.MetricType_COUNTER, "Callers moved to another QP by the goroutine scheduler.", nil},
	"flock_messages_total":           {dto.MetricType_COUNTER, "Coalesced messages posted.", []string{"side"}},
	"flock_entries_total":            {dto.MetricType_COUNTER, "Requests or responses carried in messages.", []string{"side"}},
	"flock_head_reads_total":         {dto.MetricType_COUNTER, "RDMA READs of a peer ring head (piggybacked head was stale).", nil},
	"flock_dispatcher_sleeps_total":  {dto.MetricType_COUNTER, "Dispatcher sleeps on the doorbell: a client's (calls outstanding, rings empty) or an idle server's.", nil},
	"flock_dispatcher_wakeups_total": {dto.MetricType_COUNTER, "Doorbells rung to wake a sleeping dispatcher (a client's by the server, the server's by a client).", nil},
	"flock_peers":                    {dto.MetricType_GAUGE, "Senders connected to the server (released when they leave or die).", nil},
	"flock_server_qps":               {dto.MetricType_GAUGE, "QPs the server holds for its senders.", nil},
}

// TestCollector: after FLOCK calls on shm, the registry shows every
// flock_* series with its type, help and labels, and the values are the
// snapshot's.
func TestCollector(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(20*time.Second))
	defer cancel()
	d, err := rdma.Open(rdma.WithShmSize(1 << 28))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()

	m := flock.NewMetrics()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(flockmetrics.New(m)))

	// No QP scheduling rounds: the sender keeps the QPs it was given at
	// attach, so flock_active_qps holds still.
	s, err := flock.NewServer(d, flock.WithMetrics(m), flock.WithSchedInterval(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	s.Handle(1, func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	accepted := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx, d, b)
		accepted <- err
	}()
	c, err := flock.Dial(ctx, d, a, flock.WithQPs(2), flock.WithMetrics(m), flock.WithSchedInterval(0))
	require.NoError(t, err)
	require.NoError(t, <-accepted)
	defer func() { require.NoError(t, c.Close()) }()
	const calls = 50
	for i := 0; i < calls; i++ {
		resp, err := c.Call(ctx, 1, []byte("metrics"))
		require.NoError(t, err)
		require.Equal(t, "metrics", string(resp))
	}

	// The server counts a reply after posting it, so its count may trail
	// the client's answer.
	require.Eventually(t, func() bool { return m.Snapshot().Sides["server"].Entries == calls },
		testenv.HangGuard(20*time.Second), time.Millisecond)

	fams, err := reg.Gather()
	require.NoError(t, err)
	snap := m.Snapshot()
	got := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		got[f.GetName()] = f
	}
	require.Len(t, got, len(want))
	for name, w := range want {
		f := got[name]
		require.NotNil(t, f, name)
		assert.Equal(t, w.typ, f.GetType(), name)
		assert.Equal(t, w.help, f.GetHelp(), name)
		require.NotEmpty(t, f.GetMetric(), name)
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName())
			}
			assert.Equal(t, w.labels, labels, name)
		}
	}

	byLabel := func(name string) map[string]*dto.Metric {
		out := map[string]*dto.Metric{}
		for _, mt := range got[name].GetMetric() {
			lv := ""
			if len(mt.GetLabel()) > 0 {
				lv = mt.GetLabel()[0].GetValue()
			}
			out[lv] = mt
		}
		return out
	}
	require.Len(t, byLabel("flock_messages_total"), 2, "a series per side")
	for side, ss := range snap.Sides {
		h := byLabel("flock_coalescing_degree")[side].GetHistogram()
		assert.Equal(t, ss.Degree.Count, h.GetSampleCount(), side)
		assert.Equal(t, ss.Degree.Sum, h.GetSampleSum(), side)
		var bounds []float64
		var cum uint64
		for i, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			cum += ss.Degree.Counts[i]
			assert.Equal(t, cum, b.GetCumulativeCount(), "%s le=%v", side, b.GetUpperBound())
		}
		assert.Equal(t, []float64{1, 2, 4, 8, 16, 32, 64}, bounds)
		assert.Equal(t, float64(ss.Messages), byLabel("flock_messages_total")[side].GetCounter().GetValue(), side)
		assert.Equal(t, float64(ss.Entries), byLabel("flock_entries_total")[side].GetCounter().GetValue(), side)
		assert.Equal(t, float64(calls), byLabel("flock_entries_total")[side].GetCounter().GetValue(), side)
	}
	assert.Equal(t, 1.0, byLabel("flock_peers")[""].GetGauge().GetValue())
	assert.Equal(t, 2.0, byLabel("flock_server_qps")[""].GetGauge().GetValue())
	assert.Equal(t, map[string]float64{"0": 2}, snap.ActiveQPs)
	assert.Equal(t, 2.0, byLabel("flock_active_qps")["0"].GetGauge().GetValue())
}
