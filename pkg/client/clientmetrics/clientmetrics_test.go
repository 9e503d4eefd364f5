package clientmetrics_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func value(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func TestClientMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		server.WithLimiter("echo", limiter(func() bool { return !overloaded.Load() })))
	srv.Register(wiretest.NewEcho().Service())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	reg := prometheus.NewRegistry()
	m := clientmetrics.New(reg)
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithInterceptors(m.Interceptor()))
	require.NoError(t, err)
	call := func(mode int32) error {
		return conn.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "x", Mode: mode}, &wiretest.EchoResult{})
	}
	require.NoError(t, call(wiretest.ModeEcho))
	require.NoError(t, call(wiretest.ModeEcho))
	require.NoError(t, call(wiretest.ModeDeclared), "a declared exception is a reply")
	require.Error(t, call(wiretest.ModePlain))
	overloaded.Store(true)
	require.ErrorIs(t, call(wiretest.ModeEcho), proto.ErrOverloaded)
	overloaded.Store(false)
	short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
	<-short.Done()
	err = conn.Call(short, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "x"}, &wiretest.EchoResult{})
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-served, server.ErrServerClosed)
	err = call(wiretest.ModeEcho)
	require.ErrorIs(t, err, client.ErrConnClosed)
	conn.Close()

	fn := map[string]string{"service": "Echo", "function": "echo"}
	assert.Equal(t, 7.0, value(t, reg, "hatrpc_client_calls_total", fn))
	assert.Equal(t, 7.0, value(t, reg, "hatrpc_client_call_duration_seconds", fn))
	assert.Equal(t, 0.0, value(t, reg, "hatrpc_client_in_flight", fn))
	for outcome, n := range map[string]float64{
		"ok": 2, "EchoError": 1, "internal_error": 1, "overload": 1, "deadline": 1, "transport_error": 1,
	} {
		lbl := map[string]string{"service": "Echo", "function": "echo", "outcome": outcome}
		assert.Equal(t, n, value(t, reg, "hatrpc_client_handled_total", lbl), outcome)
		if outcome == "ok" {
			n = 0
		}
		assert.Equal(t, n, value(t, reg, "hatrpc_client_errors_total", lbl), outcome)
	}
	assert.Equal(t, 5.0, value(t, reg, "hatrpc_client_errors_total", nil))
}

var overloaded atomic.Bool

type limiter func() bool

func (l limiter) Allow() bool { return l() }

func TestBucketsMatchServer(t *testing.T) {
	assert.Equal(t, server.DurationBuckets, clientmetrics.DurationBuckets)
}

// TestClientDoesNotImportPrometheus: pkg/client itself stays free of
// Prometheus; the metrics live here. (pkg/flock, which pkg/client uses for
// qp_sharing, still registers FLOCK metrics with it.)
func TestClientDoesNotImportPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/hatrpc/hatrpc/pkg/client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, string(out), "prometheus")
	assert.True(t, strings.Contains(string(out), "github.com/hatrpc/hatrpc/pkg/proto"), "the list is real: %s", out)
}
