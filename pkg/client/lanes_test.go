//go:build cgo && linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// laneServer serves the echo service with lanes on the shm provider.
func laneServer(t *testing.T, opts ...server.Option) *testServer {
	t.Helper()
	return serve(t, "", append([]server.Option{server.WithRDMA(fastpathtest.Provider())}, opts...)...)
}

// route is where a test's calls and streams go: TCP or a lane (shm
// here, ibv in the VM suite).
type route struct {
	name  string
	lanes bool
}

var tcpAndLane = []route{{"tcp", false}, {"lane", true}}

// serve starts a test server whose calls and streams take the route.
func (r route) serve(t *testing.T, opts ...server.Option) *testServer {
	t.Helper()
	if r.lanes {
		return laneServer(t, opts...)
	}
	return serve(t, "", opts...)
}

// callsOn reads the server's call counter for echo on a transport.
func callsOn(t *testing.T, ts *testServer, transport string) float64 {
	t.Helper()
	return serverCounter(t, ts, "hatrpc_server_calls_total", map[string]string{"function": "echo", "transport": transport})
}

func methodWith(set hints.Set) *client.Method {
	return &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo", Client: set}}
}

func TestLanesCarryCalls(t *testing.T) {
	cases := []struct {
		name string
		set  hints.Set
	}{
		{"default", hints.Set{}},
		{"eager-busy", hints.Set{Protocol: hints.ProtoEager, Polling: hints.PollBusy}},
		{"rfp-event", hints.Set{Protocol: hints.ProtoRFP, Polling: hints.PollEvent}},
		{"write-rndv-adaptive", hints.Set{Protocol: hints.ProtoWriteRNDV, Polling: hints.PollAdaptive}},
		{"hybrid", hints.Set{Protocol: hints.ProtoHybrid}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := laneServer(t)
			c := dial(t, ts.addr)
			echoOnLanes(t, ts, c, methodWith(tc.set))
			require.Equal(t, fastpathtest.Transport(), c.Plan("Echo:echo").Transport.String())
		})
	}
}

// The fast path attaches over a unix socket as over loopback TCP: it
// decides by the host id both sides exchange in the handshake, not by
// the address.
func TestLanesOverUnixSocket(t *testing.T) {
	for name, addr := range map[string]string{
		"path":     "unix:" + filepath.Join(t.TempDir(), "lanes.sock"),
		"abstract": fmt.Sprintf("unix:@hatrpc-lanes-%d-%d", os.Getpid(), time.Now().UnixNano()),
	} {
		t.Run(name, func(t *testing.T) {
			ts := serve(t, addr, server.WithRDMA(fastpathtest.Provider()))
			c := dial(t, ts.addr, client.WithRDMA(fastpathtest.Provider()))
			require.True(t, c.Upgraded())
			echoOnLanes(t, ts, c, methodWith(hints.Set{}))
		})
	}
}

// echoOnLanes echoes messages of 0 B to 200 KiB with m and asserts that
// every one ran on a fast-path lane of ts.
func echoOnLanes(t *testing.T, ts *testServer, c *client.Conn, m *client.Method) {
	t.Helper()
	sizes := []int{0, 10, 5000, 200 << 10}
	for _, n := range sizes {
		args := &wiretest.EchoArgs{Msg: strings.Repeat("x", n)}
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, args, &res))
		require.NotNil(t, res.Success)
		require.Equal(t, args.Msg, *res.Success)
	}
	require.Equal(t, float64(len(sizes)), callsOn(t, ts, fastpathtest.Transport()), "every call ran on a fast-path lane")
	require.Equal(t, 0.0, callsOn(t, ts, "tcp"))
}

func TestLanesServerFeatures(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	ic := func(ctx context.Context, info *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
		mu.Lock()
		seen = append(seen, info.Transport)
		mu.Unlock()
		return next(ctx, args)
	}
	ts := laneServer(t, server.WithInterceptors(ic))
	c := dial(t, ts.addr)
	ctx := tctx(t)

	_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "boom", Mode: wiretest.ModeDeclared})
	var ee *wiretest.EchoError
	require.ErrorAs(t, err, &ee, "declared exception")
	require.Equal(t, int32(42), ee.Code)

	_, err = echo(ctx, c, &wiretest.EchoArgs{Msg: "p", Mode: wiretest.ModePanic})
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcInternalError, ae.Type)

	requireEcho(t, ctx, c, "still alive")

	// Deadline: propagated to the handler, and the call returns on time.
	for len(ts.echo.Deadlines) > 0 {
		<-ts.echo.Deadlines
	}
	// The server would answer after an hour: only the deadline ends the
	// call (the hang guard fails one that waits), however slow the host.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = awaitCall(t, callAsync(func() error {
		_, err := echo(dctx, c, &wiretest.EchoArgs{Msg: "slow", DelayNs: int64(time.Hour)})
		return err
	}), "the call outlived its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	d := recvWithin(t, ts.echo.Deadlines, 5*time.Second, "handler saw no deadline")
	require.Greater(t, d, time.Duration(0))
	require.LessOrEqual(t, d, 200*time.Millisecond)
	// The timed-out lane was replaced: later calls work.
	requireEcho(t, ctx, c, "after timeout")

	// Oneway.
	require.NoError(t, c.Call(ctx, wiretest.FireMethod, &wiretest.EchoArgs{Msg: "fired"}, nil))
	msg := recvWithin(t, ts.echo.Fired, 5*time.Second, "oneway not delivered")
	require.Equal(t, "fired", msg)

	// Unknown method.
	err = c.Call(ctx, &client.Method{Service: "Echo", Name: "nope"}, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcUnknownMethod, ae.Type)

	mu.Lock()
	for _, tr := range seen {
		require.Equal(t, fastpathtest.Transport(), tr)
	}
	require.NotEmpty(t, seen)
	mu.Unlock()
	require.Greater(t, laneGauge(t, ts), 0.0)
}

func laneGauge(t *testing.T, ts *testServer) float64 {
	mfs, err := ts.srv.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "hatrpc_server_lanes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

func TestLanesConcurrent(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr, client.WithMaxLanes(4))
	runConcurrent(t, c, wiretest.EchoMethod, 32, 50)
	require.Equal(t, 32.0*50, callsOn(t, ts, fastpathtest.Transport()))
}

// TestLanesOneLaneManyCallers: with one lane, every caller but one waits
// in the pool and each return of the lane must wake one (the lane parked
// outside the channel for a caller that does not wait must not strand
// the ones that do).
func TestLanesOneLaneManyCallers(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr, client.WithMaxLanes(1))
	runConcurrent(t, c, wiretest.EchoMethod, 8, 200)
	require.Equal(t, 8.0*200, callsOn(t, ts, fastpathtest.Transport()))
	st := c.LaneStats()
	require.Len(t, st, 1)
	require.Equal(t, 1, st[0].Lanes)
}

func TestLanesPinnedTCPAndConflict(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	// transport=tcp on the client keeps the function on TCP.
	m := methodWith(hints.Set{Transport: hints.TransportTCP})
	var res wiretest.EchoResult
	require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "tcp"}, &res))
	require.Equal(t, 1.0, callsOn(t, ts, "tcp"))
	require.Equal(t, 0.0, callsOn(t, ts, fastpathtest.Transport()))

	// The server pins echo to TCP; a client that insists on the fast path
	// is refused with an error naming the function.
	e := wiretest.NewEcho()
	svc := e.Service()
	svc.Hints = &hints.Service{Name: "Echo", Functions: []hints.Function{{Name: "echo", Server: hints.Set{Transport: hints.TransportTCP}}}}
	svc.Methods[0].Hints = &svc.Hints.Functions[0]
	s := server.New(server.WithLogger(quiet), server.WithRDMA(fastpathtest.Provider()))
	s.Register(svc)
	ts2 := serveWith(t, s)
	c2 := dial(t, ts2)
	err := c2.Call(tctx(t), methodWith(hints.Set{Transport: fastpathtest.HintTransport()}), &wiretest.EchoArgs{Msg: "x"}, &res)
	require.ErrorIs(t, err, client.ErrPlanConflict)
	require.EqualError(t, err, "function Echo:echo: the client asks for a "+fastpathtest.Transport()+" lane but the server pins the function to transport=tcp")

	// With the hint tables given at Dial, the refusal comes from Dial.
	_, err = client.Dial(tctx(t), ts2, client.WithHints(&hints.Service{Name: "Echo",
		Functions: []hints.Function{{Name: "echo", Client: hints.Set{Transport: fastpathtest.HintTransport()}}}}))
	require.ErrorIs(t, err, client.ErrPlanConflict)
}

func TestLanesOffStaysTCP(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr, client.WithRDMA("off"))
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "plain"})
	require.NoError(t, err)
	require.Equal(t, "plain", got)
	require.Equal(t, 1.0, callsOn(t, ts, "tcp"))
	require.Equal(t, "tcp", c.Plan("Echo:echo").Transport.String())
}

func TestLanesShutdownGraceful(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "warm"})
	require.NoError(t, err)
	for len(ts.echo.Deadlines) > 0 {
		<-ts.echo.Deadlines
	}
	done := make(chan error, 1)
	go func() {
		_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "in flight", DelayNs: int64(300 * time.Millisecond)})
		done <- err
	}()
	// The handler reports its (tctx) deadline as it starts: the call is in
	// flight before Shutdown, where a sleep bet that it would be.
	recvWithin(t, ts.echo.Deadlines, 5*time.Second, "the call did not reach its handler")
	sctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
	defer cancel()
	require.NoError(t, ts.srv.Shutdown(sctx))
	err = recvWithin(t, done, 5*time.Second, "in-flight call hung")
	require.NoError(t, err, "the in-flight call finishes during a graceful shutdown")
	_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "a closed server fails calls fast: %v", err)
}

// serveWith serves s on a fresh port and closes it at cleanup.
func serveWith(t *testing.T, s *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case <-served:
		case <-time.After(testenv.HangGuard(5 * time.Second)):
			t.Error("Serve did not return")
		}
	})
	return ln.Addr().String()
}

// TestLanesNUMAOneNode: a numa hint on a one-node machine is a logged
// no-op (and the calls work).
func TestLanesNUMAOneNode(t *testing.T) {
	var buf syncBuffer
	e := wiretest.NewEcho()
	svc := e.Service()
	svc.Hints = &hints.Service{Name: "Echo", Server: hints.Set{NUMA: hints.NUMANode(0)},
		Functions: []hints.Function{{Name: "echo", Server: hints.Set{NUMA: hints.NUMANode(0)}}}}
	svc.Methods[0].Hints = &svc.Hints.Functions[0]
	s := server.New(server.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), server.WithRDMA(fastpathtest.Provider()))
	s.Register(svc)
	addr := serveWith(t, s)
	c := dial(t, addr)
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "numa"})
	require.NoError(t, err)
	require.Equal(t, "numa", got)
	if len(fastpathNodes()) <= 1 {
		require.Eventually(t, func() bool {
			return strings.Contains(buf.String(), "numa=0 ignored: this machine has 1 NUMA node(s)")
		}, testenv.HangGuard(5*time.Second), 10*time.Millisecond, "log: %s", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fastpathNodes() []string {
	ents, _ := os.ReadDir("/sys/devices/system/node")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "node") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestLanesOverflowToFlock: with qp_sharing=auto, callers beyond the lanes
// the plan allows share the process's FLOCK handle instead of queueing.
func TestLanesOverflowToFlock(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr, client.WithMaxLanes(2))
	m := &client.Method{Service: "Echo", Name: "echo", Hints: &hints.Function{Name: "echo",
		Client: hints.Set{PayloadSize: 256, Polling: hints.PollEvent}, Server: hints.Set{PayloadSize: 256}}}
	runConcurrent(t, c, m, 32, 30)
	st := c.LaneStats()
	require.Len(t, st, 1)
	require.LessOrEqual(t, st[0].Lanes, 2)
	require.Greater(t, st[0].Requests["flock"], uint64(0), "overflow went through FLOCK: %v", st[0].Requests)
	var total uint64
	for _, n := range st[0].Requests {
		total += n
	}
	require.Equal(t, uint64(32*30), total)
}

// TestLanesAdaptivePollingMetrics: adaptive lanes run under the tuner,
// whose decisions the server exports.
func TestLanesAdaptivePollingMetrics(t *testing.T) {
	ts := laneServer(t)
	c := dial(t, ts.addr)
	m := methodWith(hints.Set{Polling: hints.PollAdaptive})
	decisions := func() float64 {
		mfs, err := ts.srv.Registry().Gather()
		require.NoError(t, err)
		var n float64
		for _, mf := range mfs {
			if mf.GetName() == "hatrpc_rdma_polling_decisions_total" {
				for _, m := range mf.GetMetric() {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	before := decisions()
	require.Eventually(t, func() bool {
		var res wiretest.EchoResult
		require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "adaptive"}, &res))
		return decisions() > before
	}, testenv.HangGuard(5*time.Second), time.Millisecond, "the tuner decided nothing while an adaptive lane was open")
}
