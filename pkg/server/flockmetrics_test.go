//go:build cgo && linux

package server_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestFlockMetricsExported: the server's FLOCK side records on the
// server's registry, so /metrics shows the flock_* series once a client
// called through FLOCK, and none before.
func TestFlockMetricsExported(t *testing.T) {
	s, _, addr := start(t, server.WithRDMA(fastpathtest.Provider()))
	names := func() map[string]bool {
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		out := map[string]bool{}
		for _, mf := range mfs {
			out[mf.GetName()] = true
		}
		return out
	}
	require.False(t, names()["flock_peers"], "flock_* series before any FLOCK client")

	c := dial(t, addr)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64},
		Server: hints.Set{PayloadSize: 64}}}
	const calls = 5
	for range calls {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "flock"}, &res))
		require.NotNil(t, res.Success)
		require.Equal(t, "flock", *res.Success)
	}
	st := c.LaneStats()
	require.Len(t, st, 1)
	require.Equal(t, uint64(calls), st[0].Requests["flock"], "the calls did not go through FLOCK: %v", st[0].Requests)

	// The server counts a reply after posting it, so the count may trail
	// the client's answer.
	var mfs []*dto.MetricFamily
	require.Eventually(t, func() bool {
		var err error
		mfs, err = s.Registry().Gather()
		require.NoError(t, err)
		return metricValue(mfs, "flock_entries_total", map[string]string{"side": "server"}) == calls
	}, eventually, time.Millisecond, "flock_entries_total{side=server} never reached %d", calls)
	require.Equal(t, 1.0, metricValue(mfs, "flock_peers", nil))
	require.Positive(t, metricValue(mfs, "flock_coalescing_degree", map[string]string{"side": "server"}))
	require.Positive(t, metricValue(mfs, "flock_server_qps", nil))
}
