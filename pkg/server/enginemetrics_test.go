//go:build cgo && linux

package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestEngineMessagesMetric: engine_messages_total counts a dedicated
// lane's replies by the protocol they went by (a hybrid function's small
// reply eager, its large one write_rndv, never "hybrid"), live lanes and
// closed ones; lane_replies_total counts FLOCK's replies as flock.
func TestEngineMessagesMetric(t *testing.T) {
	svc := wiretest.NewEcho().Service()
	svc.Methods[0].Hints = &hints.Function{Name: "echo", Server: hints.Set{Protocol: hints.ProtoHybrid}}
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	s.Register(svc)
	addr := serveOn(t, s)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		return metricValue(mfs, name, labels)
	}
	engine := func(p string) float64 {
		return value("hatrpc_server_engine_messages_total", map[string]string{"service": "Echo", "function": "echo", "protocol": p})
	}

	c := dial(t, addr)
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo"}}
	for _, n := range []int{64, 64, 256 << 10} {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: strings.Repeat("x", n)}, &res))
	}
	// The reply is counted once sent, which the client's answer may beat.
	require.Eventually(t, func() bool { return engine("eager") == 2 && engine("write_rndv") == 1 }, eventually, time.Millisecond)
	require.Equal(t, 3.0, value("hatrpc_server_engine_messages_total", nil), "hybrid itself is never counted")
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return value("hatrpc_server_lanes", nil) == 0 }, eventually, time.Millisecond)
	require.Equal(t, 2.0, engine("eager"), "a closed lane's count stays")
	require.Equal(t, 1.0, engine("write_rndv"))

	c = dial(t, addr)
	shared := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{QPSharing: hints.SwitchOn, PerfGoal: hints.Throughput, PayloadSize: 64},
		Server: hints.Set{PayloadSize: 64}}}
	for range 3 {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), shared, &wiretest.EchoArgs{Msg: "flock"}, &res))
	}
	require.Equal(t, uint64(3), c.RouteStats().FLOCK)
	flock := map[string]string{"function": "echo", "protocol": "flock"}
	require.Eventually(t, func() bool { return value("hatrpc_server_lane_replies_total", flock) == 3 }, eventually, time.Millisecond)
	require.Equal(t, 3.0, value("hatrpc_server_engine_messages_total", nil), "FLOCK sends by no engine protocol")
}
