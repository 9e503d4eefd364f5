//go:build cgo && linux

package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestLaneMetricsExact: the calls of a dedicated lane, counted by its
// meter, show in the server's families as exactly as the TCP path's: every
// call ended is in calls_total, handled_total (by outcome), the duration
// histogram and the byte counters (once its reply is out), a call running
// is in in_flight, and all of it stays once the lane is gone.
func TestLaneMetricsExact(t *testing.T) {
	s, _, addr := start(t, server.WithRDMA(fastpathtest.Provider()))
	c := dial(t, addr)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	call := func(ctx context.Context, mode int32) error {
		var res wiretest.EchoResult
		return c.Call(ctx, m, &wiretest.EchoArgs{Msg: "lane", Mode: mode}, &res)
	}
	const ok = 5
	for range ok {
		require.NoError(t, call(tctx(t), wiretest.ModeEcho))
	}
	require.Error(t, call(tctx(t), wiretest.ModePlain))
	st := c.LaneStats()
	require.Len(t, st, 1)
	var laneCalls uint64
	for _, n := range st[0].Requests {
		laneCalls += n
	}
	require.Equal(t, uint64(ok+1), laneCalls, "every call went by the lane")

	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		return metricValue(mfs, name, labels)
	}
	fn := map[string]string{"function": "echo"}
	check := func(calls, inFlight float64) {
		t.Helper()
		require.Equal(t, calls, value("hatrpc_server_calls_total", fn))
		require.Equal(t, inFlight, value("hatrpc_server_in_flight", fn))
		require.Equal(t, float64(ok), value("hatrpc_server_handled_total", map[string]string{"function": "echo", "outcome": "ok"}))
		require.Equal(t, calls-inFlight, value("hatrpc_server_handled_total", fn))
		require.Equal(t, calls-inFlight, value("hatrpc_server_call_duration_seconds", fn))
		require.Equal(t, 1.0, value("hatrpc_server_errors_total", fn))
		require.Positive(t, value("hatrpc_server_request_bytes_total", fn))
		require.Positive(t, value("hatrpc_server_reply_bytes_total", fn))
		require.GreaterOrEqual(t, value("hatrpc_server_lane_replies_total", fn), float64(ok+1))
	}
	// A lane files a call's end once its reply is out, maybe just after
	// its client has it (rdma.AfterReply).
	require.Eventually(t, func() bool { return value("hatrpc_server_in_flight", fn) == 0 }, eventually, time.Millisecond)
	check(ok+1, 0)
	// The adaptive poller's input: the idle lane's server end waits in C
	// for the next request, the client's end only during a call. (Both
	// ends live in this process: 2 would mean a side counted wrongly.)
	waiting := func() float64 { return value("hatrpc_rdma_lanes_waiting", nil) }
	require.Eventually(t, func() bool { return waiting() == 1 }, eventually, time.Millisecond,
		"the idle lane's server waits in C")
	// The lanes' waits spun (adaptive polling: a reply's wait, the idle
	// server's first 100 µs), and the poller's load is a share.
	polled := value("hatrpc_rdma_lanes_polled_seconds_total", nil)
	require.Positive(t, polled)
	load := value("hatrpc_rdma_polling_load", nil)
	require.True(t, load >= 0 && load <= 1, "load %v", load)

	// A call held by its handler is in flight, and counted as begun.
	ctx, cancel := context.WithCancel(tctx(t))
	done := make(chan error, 1)
	go func() { done <- call(ctx, wiretest.ModeWaitCtx) }()
	require.Eventually(t, func() bool { return value("hatrpc_server_in_flight", fn) == 1 },
		eventually, time.Millisecond, "the held call never showed in in_flight")
	require.Equal(t, float64(ok+2), value("hatrpc_server_calls_total", fn))
	require.Equal(t, 1.0, waiting(), "the caller waits in C; the server runs the handler, in Go")
	cancel()
	require.Error(t, <-done)
	// The interrupted exchange ends the lane (the client drops it); its
	// counts stay, the held call's end included.
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		lanes, _, _, _ := server.FastPathInUse(s)
		return lanes == 0 && value("hatrpc_server_in_flight", fn) == 0
	}, eventually, time.Millisecond, "the lane or its call outlived the client")
	require.Zero(t, waiting(), "a closed lane is not counted")
	require.GreaterOrEqual(t, value("hatrpc_rdma_lanes_polled_seconds_total", nil), polled, "a closed lane's polling stays counted")
	require.Equal(t, float64(ok+2), value("hatrpc_server_calls_total", fn))
	require.Equal(t, float64(ok+2), value("hatrpc_server_call_duration_seconds", fn))
	require.Equal(t, float64(ok+2), value("hatrpc_server_handled_total", fn))
}
