package server_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// gate is a limiter the test opens call by call.
type gate struct {
	tokens atomic.Int64
	asked  atomic.Int64
}

func (g *gate) Allow() bool {
	g.asked.Add(1)
	for {
		n := g.tokens.Load()
		if n <= 0 {
			return false
		}
		if g.tokens.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// TestOutcomeMetrics: every way a call ends is counted under its outcome
// in handled_total, and all but ok in errors_total too.
func TestOutcomeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _, addr := start(t, server.WithRegistry(reg))
	c := dial(t, addr)
	tests := []struct {
		mode    int32
		outcome string
	}{
		{wiretest.ModeEcho, "ok"},
		{wiretest.ModeDeclared, "EchoError"},
		{wiretest.ModePlain, "internal_error"},
		{wiretest.ModePanic, "internal_error"},
		{wiretest.ModeAppExc, "unknown"},
		{wiretest.ModeNoResult, "missing_result"},
	}
	for _, tt := range tests {
		_, _ = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "x", Mode: tt.mode})
	}
	// A call whose server-side deadline (a timeout hint) passes while its
	// handler waits: the server's own timer ends it, so the outcome does
	// not race a Cancel frame from the client.
	svc := wiretest.NewEcho().Service()
	svc.Name = "Timed"
	for i := range svc.Methods {
		svc.Methods[i].Hints = &hints.Function{Name: svc.Methods[i].Name, Server: hints.Set{Timeout: 20 * time.Millisecond}}
	}
	s.Register(svc)
	err := dial(t, addr, client.WithMultiplexed()).Call(tctx(t), &client.Method{Service: "Timed", Name: "echo"},
		&wiretest.EchoArgs{Msg: "late", Mode: wiretest.ModeWaitCtx}, &wiretest.EchoResult{})
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	tests = append(tests, struct {
		mode    int32
		outcome string
	}{wiretest.ModeWaitCtx, "deadline"})

	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		return err == nil && metricValue(mfs, "hatrpc_server_handled_total", nil) == float64(len(tests))
	}, eventually, 2*time.Millisecond)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	want := map[string]float64{}
	for _, tt := range tests {
		want[tt.outcome]++
	}
	for outcome, n := range want {
		lbl := map[string]string{"function": "echo", "transport": "tcp", "outcome": outcome}
		assert.Equal(t, n, metricValue(mfs, "hatrpc_server_handled_total", lbl), outcome)
		if outcome == "ok" {
			n = 0
		}
		assert.Equal(t, n, metricValue(mfs, "hatrpc_server_errors_total", lbl), outcome)
	}
	assert.Equal(t, float64(len(tests)-1), metricValue(mfs, "hatrpc_server_errors_total", nil))
}

// TestDurationBuckets: the call duration histogram reaches well past a
// second (it stopped at 0.745 s).
func TestDurationBuckets(t *testing.T) {
	b := server.DurationBuckets
	assert.Equal(t, 5e-6, b[0])
	assert.InDelta(t, 29.1, b[len(b)-1], 0.1)
	reg := prometheus.NewRegistry()
	_, _, addr := start(t, server.WithRegistry(reg))
	_, err := echo(tctx(t), dial(t, addr), &wiretest.EchoArgs{Msg: "x"})
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "hatrpc_server_call_duration_seconds" {
			bs := mf.GetMetric()[0].GetHistogram().GetBucket()
			assert.Len(t, bs, len(b))
			assert.InDelta(t, 29.1, bs[len(bs)-1].GetUpperBound(), 0.1)
			return
		}
	}
	t.Fatal("no call duration histogram")
}

// TestRateLimit: calls over a function's limit do not run; the caller
// gets proto.ErrOverloaded, on the HatRPC framing and on plain Thrift,
// and the server counts them with outcome overload. Other functions and
// other keys are not limited.
func TestRateLimit(t *testing.T) {
	tests := []struct {
		name, key string
		opts      []client.Option
	}{
		{"qualified name, upgraded", "Echo:echo", nil},
		{"plain name, plain thrift", "echo", []client.Option{client.WithoutUpgrade()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gate{}
			g.tokens.Store(2)
			reg := prometheus.NewRegistry()
			_, _, addr := start(t, server.WithRegistry(reg), server.WithLimiter(tt.key, g),
				server.WithLimiter("Echo:other", &gate{}))
			c := dial(t, addr, tt.opts...)
			for i := range 2 {
				got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "ok"})
				require.NoError(t, err, "call %d within the limit", i)
				assert.Equal(t, "ok", got)
			}
			_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "over", Mode: wiretest.ModePanic})
			require.ErrorIs(t, err, proto.ErrOverloaded)
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, "overloaded: rate limit exceeded; retry later", ae.Message)
			assert.Equal(t, proto.ExcInternalError, ae.Type, "what any Thrift client understands")
			assert.False(t, errors.Is(proto.NewApplicationException(proto.ExcInternalError, "boom"), proto.ErrOverloaded))

			g.tokens.Store(1)
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "again"})
			require.NoError(t, err, "a token later, the function runs again")
			assert.Equal(t, "again", got)
			assert.Equal(t, int64(4), g.asked.Load())

			mfs, err := reg.Gather()
			require.NoError(t, err)
			assert.Equal(t, 1.0, metricValue(mfs, "hatrpc_server_errors_total", map[string]string{"function": "echo", "outcome": "overload"}))
			assert.Equal(t, 3.0, metricValue(mfs, "hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "ok"}))
			assert.Equal(t, 4.0, metricValue(mfs, "hatrpc_server_calls_total", map[string]string{"function": "echo"}))
			assert.Zero(t, metricValue(mfs, "hatrpc_server_errors_total", map[string]string{"function": "echo", "outcome": "internal_error"}),
				"the refused call's handler never ran (it would have panicked)")
		})
	}
}

// TestWithRateLimit: the x/time/rate token bucket behind WithRateLimit.
// A rate of one call an hour leaves exactly the burst for the test.
func TestWithRateLimit(t *testing.T) {
	_, _, addr := start(t, server.WithRateLimit("echo", rate.Every(time.Hour), 3))
	c := dial(t, addr)
	var ok, over int
	for range 5 {
		_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "x"})
		switch {
		case err == nil:
			ok++
		case errors.Is(err, proto.ErrOverloaded):
			over++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 3, ok)
	assert.Equal(t, 2, over)
}
