package server_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// metricValue sums the counter/gauge/histogram-count samples of name whose
// labels include want.
func metricValue(mfs []*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum += server.SumOf(mf, want)
		}
	}
	return sum
}

func TestMetricsAndDebugEndpoint(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _, addr := start(t, server.WithRegistry(reg), server.WithDebugAddr("127.0.0.1:0"))
	up := dial(t, addr)
	plain := dial(t, addr, client.WithoutUpgrade())
	for range 3 {
		_, err := echo(tctx(t), up, &wiretest.EchoArgs{Msg: "x"})
		require.NoError(t, err)
	}
	_, err := echo(tctx(t), plain, &wiretest.EchoArgs{Msg: "x"})
	require.NoError(t, err)
	_, err = echo(tctx(t), plain, &wiretest.EchoArgs{Msg: "x", Mode: wiretest.ModePlain})
	require.Error(t, err)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	cases := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"hatrpc_server_calls_total", map[string]string{"service": "Echo", "function": "echo", "transport": "tcp"}, 3},
		{"hatrpc_server_calls_total", map[string]string{"service": "Echo", "function": "echo", "transport": "thrift"}, 2},
		{"hatrpc_server_errors_total", map[string]string{"service": "Echo", "function": "echo", "transport": "thrift"}, 1},
		{"hatrpc_server_call_duration_seconds", map[string]string{"function": "echo"}, 5},
		{"hatrpc_server_in_flight", map[string]string{"function": "echo"}, 0},
		{"hatrpc_server_connections", nil, 2},
		{"hatrpc_server_errors_total", map[string]string{"function": "echo", "transport": "thrift", "outcome": "internal_error"}, 1},
		{"hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "ok"}, 4},
		{"hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "internal_error"}, 1},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, metricValue(mfs, tc.name, tc.labels), tc.name)
	}
	require.Greater(t, metricValue(mfs, "hatrpc_server_bytes_in_total", map[string]string{"transport": "tcp"}), 0.0)
	// Each echo request carries at least its 3-byte method name and "x".
	require.GreaterOrEqual(t, metricValue(mfs, "hatrpc_server_request_bytes_total", map[string]string{"function": "echo", "transport": "tcp"}), 3*8.0)
	require.GreaterOrEqual(t, metricValue(mfs, "hatrpc_server_reply_bytes_total", map[string]string{"function": "echo", "transport": "thrift"}), 2*8.0)
	require.Greater(t, metricValue(mfs, "hatrpc_server_bytes_out_total", map[string]string{"transport": "thrift"}), 0.0)

	da, err := s.StartDebug()
	require.NoError(t, err)
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		resp, err := http.Get("http://" + da.String() + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		if path == "/metrics" {
			require.Contains(t, string(body), `hatrpc_server_calls_total{function="echo",service="Echo",transport="tcp"} 3`)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// waitInFlight waits until n calls are inside handlers, so a test acts on
// calls that really reached the server rather than sleeping and hoping.
func waitInFlight(t *testing.T, s *server.Server, n float64) {
	t.Helper()
	require.Eventually(t, func() bool {
		mfs, err := s.Registry().Gather()
		return err == nil && metricValue(mfs, "hatrpc_server_in_flight", nil) == n
	}, testenv.HangGuard(10*time.Second), 2*time.Millisecond, "expected %v calls in flight", n)
}

// The server's own registry carries the Go runtime and process series; a
// registry the user passes gets only the server's metrics (it may hold
// those collectors already, and registering them twice would fail).
func TestRuntimeMetrics(t *testing.T) {
	runtimeSeries := []string{"go_goroutines", "go_memstats_mallocs_total", "go_gc_duration_seconds", "process_cpu_seconds_total"}
	tests := []struct {
		name    string
		opts    []server.Option
		present bool
	}{
		{"private registry", nil, true},
		{"user registry", []server.Option{server.WithRegistry(prometheus.NewRegistry())}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := start(t, tc.opts...)
			mfs, err := s.Registry().Gather()
			require.NoError(t, err)
			names := map[string]bool{}
			for _, mf := range mfs {
				names[mf.GetName()] = true
			}
			for _, n := range runtimeSeries {
				require.Equal(t, tc.present, names[n], n)
			}
		})
	}
}
