//go:build cgo && linux

package clientmetrics_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// TestRoutes: a Conn's calls by route, and its lanes' messages by the
// protocol the engine used: a hybrid function's small request goes eager,
// its large one by write_rndv; a function pinned to TCP stays there.
func TestRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), server.WithRDMA(fastpathtest.Provider()))
	srv.Register(wiretest.NewEcho().Service())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, server.ErrServerClosed)
	}()
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	defer conn.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(clientmetrics.Routes(conn, prometheus.Labels{"server": "s1"}))

	method := func(set hints.Set) *client.Method {
		return &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: set}}
	}
	hybrid := method(hints.Set{Protocol: hints.ProtoHybrid})
	for _, n := range []int{64, 64, 256 << 10} {
		var res wiretest.EchoResult
		require.NoError(t, conn.Call(ctx, hybrid, &wiretest.EchoArgs{Msg: strings.Repeat("x", n)}, &res))
	}
	var res wiretest.EchoResult
	pinned := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: hints.Set{Transport: hints.TransportTCP}}}
	require.NoError(t, conn.Call(ctx, pinned, &wiretest.EchoArgs{Msg: "tcp"}, &res))

	srvLbl := map[string]string{"server": "s1"}
	route := func(r string) float64 {
		return value(t, reg, "hatrpc_client_route_calls_total", map[string]string{"server": "s1", "route": r})
	}
	require.Equal(t, 3.0, route("lane"))
	require.Equal(t, 0.0, route("flock"))
	require.Equal(t, 1.0, route("tcp"), "the pinned call")
	engine := func(p string) float64 {
		return value(t, reg, "hatrpc_client_engine_messages_total",
			map[string]string{"server": "s1", "service": "Echo", "function": "echo", "protocol": p})
	}
	require.Equal(t, 2.0, engine("eager"))
	require.Equal(t, 1.0, engine("write_rndv"))
	require.Equal(t, 3.0, value(t, reg, "hatrpc_client_engine_messages_total", srvLbl), "no other protocol")
}
