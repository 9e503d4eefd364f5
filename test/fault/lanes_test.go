package fault_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/testutil"
)

func init() {
	childRoles["lane-sleep"] = childLaneSleep
	childRoles["lane-server"] = childLaneServer
	childRoles["flock-client"] = childFlockClient
}

// childLaneSleep starts a long sleep call on a shm lane and is meant to be
// SIGKILLed mid-call.
func childLaneSleep(ctx context.Context, out io.Writer, _ io.Reader) error {
	c, err := client.Dial(ctx, os.Getenv(envAddr), client.WithRDMA(fastpathtest.Provider()))
	if err != nil {
		return err
	}
	defer c.Close()
	if tr := c.Plan("Interop:sleep").Transport.String(); tr != fastpathtest.Transport() {
		return fmt.Errorf("sleep would run over %s, not a shm lane", tr)
	}
	fmt.Fprintln(out, "CALLING")
	_, err = testutil.HatSleep(ctx, c, 60_000)
	return fmt.Errorf("sleep returned although the child should be dead: %v", err)
}

// childLaneServer serves the sleep service with shm lanes on
// HATRPC_FAULT_ADDR and says "SERVING" once it accepts.
func childLaneServer(ctx context.Context, out io.Writer, in io.Reader) error {
	srv := server.New(server.WithRDMA(fastpathtest.Provider()))
	srv.Register(testutil.SleepService(testutil.NewSleepHandler()))
	var ln net.Listener
	var err error
	for range 100 { // the port of a killed predecessor may linger briefly
		if ln, err = net.Listen("tcp", os.Getenv(envAddr)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintln(out, "SERVING")
	_, _ = io.Copy(io.Discard, in)
	return srv.Close()
}

// TestLaneClientKilledMidCall: a client process waiting in a call on a
// shm lane is killed; the server sees the lane's link close, cancels the
// handler and frees the lane, and a bystander is not disturbed.
func TestLaneClientKilledMidCall(t *testing.T) {
	h := testutil.NewSleepHandler()
	srv := testutil.StartServer(t, []*server.Service{testutil.SleepService(h)}, server.WithRDMA(fastpathtest.Provider()))
	probe := testutil.StartProber(t, srv.Addr, 2*time.Millisecond)

	child := testutil.StartChild(t, "lane-sleep", envAddr+"="+srv.Addr)
	child.Expect(t, "CALLING", 30*time.Second)
	require.Equal(t, int32(60_000), h.WaitStarted(t, 30*time.Second))
	child.Kill(t)
	_ = child.WaitExit(t, 10*time.Second)

	require.Eventually(t, func() bool { return h.Active() == 0 }, testenv.HangGuard(10*time.Second), 10*time.Millisecond,
		"the handler of a dead lane client is still running")
	assert.Equal(t, 1, h.Cancelled())
	n := srv.WaitConns(t, func(n int) bool { return n <= 1 }, 10*time.Second)
	assert.LessOrEqual(t, n, 1, "the dead client's connections (session and lane) are still open")
	probe.Check(t)
}

// TestLaneServerKilledMidCall: the server process dies while a client
// waits in C on a shm lane; the call fails (no hang), and once a new
// server listens on the same address, later calls of the same Conn
// reconnect and run on new lanes.
func TestLaneServerKilledMidCall(t *testing.T) {
	addr, child, c := laneServerChild(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	var err error
	require.Equal(t, fastpathtest.Transport(), c.Plan("Interop:sleep").Transport.String())
	_, err = testutil.HatSleep(ctx, c, 1)
	require.NoError(t, err)

	errc := make(chan error, 1)
	go func() {
		_, err := testutil.HatSleep(ctx, c, 60_000)
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond) // the call is waiting in C
	killed := time.Now()
	child.Kill(t)
	_ = child.WaitExit(t, 10*time.Second)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, client.ErrConnClosed)
		t.Logf("call failed %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	case <-time.After(testenv.HangGuard(15 * time.Second)):
		t.Fatal("a call on a lane to a killed server hangs")
	}

	child2 := testutil.StartChild(t, "lane-server", envAddr+"="+addr)
	child2.Expect(t, "SERVING", 30*time.Second)
	// The first call once the new server serves succeeds: nothing of the
	// dead server's (session, lanes) is handed to it.
	cctx, ccancel := context.WithTimeout(ctx, testenv.HangGuard(20*time.Second))
	_, err = testutil.HatSleep(cctx, c, 1)
	ccancel()
	require.NoError(t, err, "the first call after the server came back")
	require.Equal(t, fastpathtest.Transport(), c.Plan("Interop:sleep").Transport.String())
	require.NoError(t, child2.CloseStdin())
	require.NoError(t, child2.WaitExit(t, 10*time.Second))
}

// flockPing is Interop.ping planned with qp_sharing: it goes through the
// process's FLOCK handle.
var flockPing = &client.Method{Service: "Interop", Name: "ping", Hints: &hints.Function{Name: "ping",
	Client: hints.Set{QPSharing: hints.SwitchOn, PayloadSize: 64}, Server: hints.Set{PayloadSize: 64}}}

// childFlockClient runs 64 goroutines × 200 pings through FLOCK from its
// own process over two Conns and reports "DONE <calls> <via flock>".
func childFlockClient(ctx context.Context, out io.Writer, _ io.Reader) error {
	var conns [2]*client.Conn
	for i := range conns {
		c, err := client.Dial(ctx, os.Getenv(envAddr), client.WithRDMA(fastpathtest.Provider()))
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := conns[g%2].Call(ctx, flockPing, &testutil.EmptyStruct{}, &testutil.EmptyStruct{}); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	var via uint64
	for _, c := range conns {
		for _, s := range c.LaneStats() {
			via += s.Requests["flock"]
		}
	}
	fmt.Fprintf(out, "DONE %d %d\n", 64*200, via)
	return nil
}

// TestFlockTwoProcesses: a client process shares one FLOCK handle among 64
// goroutines on two Conns against a server in this process; every call is
// answered, all through FLOCK, and the handle goes away with the process.
func TestFlockTwoProcesses(t *testing.T) {
	h := testutil.NewSleepHandler()
	srv := testutil.StartServer(t, []*server.Service{testutil.SleepService(h)}, server.WithRDMA(fastpathtest.Provider()))
	child := testutil.StartChild(t, "flock-client", envAddr+"="+srv.Addr)
	line := child.Expect(t, "DONE", 120*time.Second)
	assert.Equal(t, "12800 12800", strings.TrimSpace(line), "calls, then calls through FLOCK")
	require.NoError(t, child.WaitExit(t, 30*time.Second))
	n := srv.WaitConns(t, func(n int) bool { return n == 0 }, 10*time.Second)
	assert.Equal(t, 0, n, "the child's session and FLOCK link are closed")
}

// TestLaneServerRestartedBetweenCalls: the server process dies while the
// client's lanes are idle and a new one listens on the same address; the
// next call of the same Conn, made once the new server serves, succeeds at
// the first try and on a lane: a lane to the dead server is not handed to
// a caller, and the call does not go over TCP instead.
func TestLaneServerRestartedBetweenCalls(t *testing.T) {
	addr, child, c := laneServerChild(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	var err error
	for range 3 {
		_, err = testutil.HatSleep(ctx, c, 1)
		require.NoError(t, err)
	}
	before := c.RouteStats()
	require.Equal(t, uint64(3), before.Lane, "the calls before the kill ran on lanes")

	child.Kill(t)
	_ = child.WaitExit(t, 10*time.Second)
	require.Eventually(t, func() bool { return openLanes(c) == 0 }, testenv.HangGuard(10*time.Second), 5*time.Millisecond,
		"the idle lanes to the dead server are still open")
	child2 := testutil.StartChild(t, "lane-server", envAddr+"="+addr)
	child2.Expect(t, "SERVING", 30*time.Second)

	for i := range 3 {
		cctx, ccancel := context.WithTimeout(ctx, testenv.HangGuard(20*time.Second))
		_, err = testutil.HatSleep(cctx, c, 1)
		ccancel()
		require.NoError(t, err, "call %d after the server came back", i)
	}
	after := c.RouteStats()
	assert.Equal(t, before.TCP, after.TCP, "calls after the restart went over TCP")
	assert.Equal(t, before.Lane+3, after.Lane, "calls after the restart ran on lanes")
	require.NoError(t, child2.CloseStdin())
	require.NoError(t, child2.WaitExit(t, 10*time.Second))
}

// openLanes is the lanes c has open, over all its functions.
func openLanes(c *client.Conn) int {
	n := 0
	for _, s := range c.LaneStats() {
		n += s.Lanes
	}
	return n
}

// TestFlockServerRestartedBetweenCalls: as TestLaneServerRestartedBetweenCalls
// for calls through the process's FLOCK handle: the handle to the dead
// server is replaced, and the first call after the restart goes through
// the new one.
func TestFlockServerRestartedBetweenCalls(t *testing.T) {
	addr, child, c := laneServerChild(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(60*time.Second))
	defer cancel()
	for range 3 {
		require.NoError(t, c.Call(ctx, flockPing, &testutil.EmptyStruct{}, &testutil.EmptyStruct{}))
	}
	require.Equal(t, uint64(3), c.RouteStats().FLOCK, "the calls before the kill went through FLOCK")

	child.Kill(t)
	_ = child.WaitExit(t, 10*time.Second)
	child2 := testutil.StartChild(t, "lane-server", envAddr+"="+addr)
	child2.Expect(t, "SERVING", 30*time.Second)

	for i := range 3 {
		cctx, ccancel := context.WithTimeout(ctx, testenv.HangGuard(20*time.Second))
		err := c.Call(cctx, flockPing, &testutil.EmptyStruct{}, &testutil.EmptyStruct{})
		ccancel()
		require.NoError(t, err, "call %d after the server came back", i)
	}
	after := c.RouteStats()
	assert.Equal(t, uint64(6), after.FLOCK, "calls after the restart went through FLOCK")
	assert.Zero(t, after.TCP, "calls after the restart went over TCP")
	require.NoError(t, child2.CloseStdin())
	require.NoError(t, child2.WaitExit(t, 10*time.Second))
}

// laneServerChild starts a lane-server child on a free port and a Conn to
// it with lanes (closed when the test ends).
func laneServerChild(t *testing.T) (string, *testutil.Child, *client.Conn) {
	t.Helper()
	ln := testutil.ListenLocal(t)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	child := testutil.StartChild(t, "lane-server", envAddr+"="+addr)
	child.Expect(t, "SERVING", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(30*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithRDMA(fastpathtest.Provider()))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return addr, child, c
}
