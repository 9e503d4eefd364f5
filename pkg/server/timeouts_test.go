package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// These tests drive the sweeper by hand (server.ManualSweep): what closes
// a connection is the logical time passed to Sweep, never how fast this
// machine runs, so they pass under any load.

// t0 is an arbitrary logical start time.
const t0 = time.Hour

func startSwept(t *testing.T, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	server.ManualSweep(s)
	server.Sweep(s, t0)
	s.Register(wiretest.NewEcho().Service())
	return s, serveOn(t, s)
}

// onlyConn waits until the server has one connection satisfying ok.
func onlyConn(t *testing.T, s *server.Server, ok func(server.ConnState) bool) server.ConnState {
	t.Helper()
	var st server.ConnState
	require.Eventually(t, func() bool {
		cs := server.Conns(s)
		if len(cs) != 1 {
			return false
		}
		st = cs[0]
		return ok == nil || ok(st)
	}, eventually, time.Millisecond)
	return st
}

// inPhase tells a connection in phase ph. An idle one must also have no
// call left: a call's reply reaches the client before the call is done
// (in flight), and a sweep meanwhile spares the connection (on the
// Soft-RoCE guest TestIdlePlainConnClosed swept in that window).
func inPhase(ph uint32) func(server.ConnState) bool {
	return func(st server.ConnState) bool { return st.Phase == ph && (ph != server.PhIdle || st.Inflight == 0) }
}

func closedBy(t *testing.T, s *server.Server, reason string) float64 {
	mfs, err := s.Registry().Gather()
	require.NoError(t, err)
	return metricValue(mfs, "hatrpc_server_connections_closed_total", map[string]string{"reason": reason})
}

// waitClosed waits until the server dropped every connection.
func waitClosed(t *testing.T, s *server.Server) {
	t.Helper()
	require.Eventually(t, func() bool { return len(server.Conns(s)) == 0 }, eventually, time.Millisecond)
}

// readsEOF asserts the server closed nc.
func readsEOF(t *testing.T, nc net.Conn) {
	t.Helper()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(testenv.HangGuard(5*time.Second))))
	_, err := io.ReadAll(nc)
	require.NoError(t, err, "the server closes the connection (EOF), not the test's deadline")
}

func TestHandshakeTimeout(t *testing.T) {
	s, addr := startSwept(t, server.WithHandshakeTimeout(10*time.Second))
	cases := []struct {
		name string
		send []byte // part of a first message
	}{
		{"silent", nil},
		{"half a hello", []byte{0x80, 0x01, 0x00}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0 + time.Duration(i)*time.Minute
			server.Sweep(s, now)
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			onlyConn(t, s, nil)
			if tc.send != nil {
				_, err = nc.Write(tc.send)
				require.NoError(t, err)
				onlyConn(t, s, func(st server.ConnState) bool { return st.InBytes == int64(len(tc.send)) })
			}
			server.Sweep(s, now+10*time.Second-time.Millisecond)
			require.Empty(t, onlyConn(t, s, nil).Closing, "still within the handshake timeout")
			server.Sweep(s, now+10*time.Second)
			readsEOF(t, nc)
			waitClosed(t, s)
			require.Equal(t, float64(i+1), closedBy(t, s, "handshake_timeout"))
		})
	}
}

// rawHello upgrades a raw connection by hand.
func rawHello(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(10*time.Second))))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	hello, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming})
	require.NoError(t, err)
	_, err = nc.Write(hello)
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	_, err = wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	require.NoError(t, err)
	return nc, br
}

func TestSlowFrameClosed(t *testing.T) {
	const grace = 5 * time.Second
	cases := []struct {
		name string
		rate int // bytes/s
		// more: a byte sent 4 s in, so the frame is not stalled at
		// grace + 1 s (and only its average rate counts).
		more      bool
		openUntil time.Duration // past grace, still open at this age
		closedAt  time.Duration
	}{
		{"too slow on average", 100, true, grace + 300*time.Millisecond, grace + time.Second},
		{"stalled", 1, false, grace - time.Millisecond, grace},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := startSwept(t, server.WithMinReadRate(grace, tc.rate), server.WithIdleTimeout(0))
			nc, _ := rawHello(t, addr)
			defer nc.Close()
			onlyConn(t, s, inPhase(server.PhIdle))
			now := t0 + time.Duration(i+1)*time.Minute
			server.Sweep(s, now)
			// A frame announcing 1,000 payload bytes, of which 10 arrive.
			f := make([]byte, wire.HeaderSize+10)
			wire.PutHeader(f, &wire.Header{Length: wire.HeaderSize - 4 + 1000, Kind: wire.KindCall, Seqid: 1})
			_, err := nc.Write(f)
			require.NoError(t, err)
			got := int64(len(f))
			onlyConn(t, s, func(st server.ConnState) bool { return st.Phase == server.PhFrame && st.Progress == got })
			if tc.more {
				server.Sweep(s, now+4*time.Second)
				_, err = nc.Write([]byte{0})
				require.NoError(t, err)
				got++
				onlyConn(t, s, func(st server.ConnState) bool { return st.Progress == got })
			}
			server.Sweep(s, now+tc.openUntil)
			require.Empty(t, onlyConn(t, s, nil).Closing, "not too slow yet")
			server.Sweep(s, now+tc.closedAt)
			readsEOF(t, nc)
			waitClosed(t, s)
			require.Equal(t, 1.0, closedBy(t, s, "slow_read"))
		})
	}
}

// An idle HatRPC client is sent a GoAway, and its next call goes out on a
// new connection instead of failing.
func TestIdleHatRPCClientRedials(t *testing.T) {
	const idle = time.Minute
	s, addr := startSwept(t, server.WithIdleTimeout(idle))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.WithConns(1))
	require.NoError(t, err)
	defer cl.Close()
	call := func() {
		var res wiretest.EchoResult
		require.NoError(t, cl.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "hi"}, &res))
		require.Equal(t, "hi", *res.Success)
	}
	call()
	onlyConn(t, s, inPhase(server.PhIdle))

	server.Sweep(s, t0+idle-time.Second)
	require.False(t, onlyConn(t, s, nil).GoAway, "not idle long enough")
	server.Sweep(s, t0+idle)
	require.Eventually(t, func() bool { return !cl.Upgraded() }, eventually, time.Millisecond,
		"the client saw the GoAway")
	server.Sweep(s, t0+idle+server.IdleGrace-time.Millisecond)
	require.Empty(t, onlyConn(t, s, nil).Closing, "the GoAway's grace period")
	server.Sweep(s, t0+idle+server.IdleGrace)
	waitClosed(t, s)
	require.Equal(t, 1.0, closedBy(t, s, "idle_timeout"))

	call() // on a new connection
	require.True(t, cl.Upgraded())
	require.Len(t, server.Conns(s), 1)
}

// A connection with a call running is not idle, however long the call.
func TestIdleSparesRunningCalls(t *testing.T) {
	const idle = time.Minute
	s, addr := startSwept(t, server.WithIdleTimeout(idle))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.WithConns(1))
	require.NoError(t, err)
	defer cl.Close()
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cl.Call(cctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "wait", Mode: wiretest.ModeWaitCtx}, &wiretest.EchoResult{})
	}()
	// The reader waits for the next call meanwhile.
	onlyConn(t, s, func(st server.ConnState) bool { return st.Inflight == 1 && st.Phase == server.PhIdle })
	server.Sweep(s, t0+10*idle)
	st := onlyConn(t, s, nil)
	require.False(t, st.GoAway)
	require.Empty(t, st.Closing)
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestIdlePlainConnClosed(t *testing.T) {
	const idle = time.Minute
	s, addr := startSwept(t, server.WithIdleTimeout(idle))
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.WithoutUpgrade())
	require.NoError(t, err)
	defer cl.Close()
	var res wiretest.EchoResult
	require.NoError(t, cl.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "hi"}, &res))
	onlyConn(t, s, inPhase(server.PhIdle))
	server.Sweep(s, t0+idle)
	waitClosed(t, s)
	require.Equal(t, 1.0, closedBy(t, s, "idle_timeout"))
	// No GoAway on plain Thrift: the client redials once its idle reader
	// saw the close (a call racing the close itself fails, hence retries).
	require.Eventually(t, func() bool {
		return cl.Call(ctx, wiretest.EchoMethod, &wiretest.EchoArgs{Msg: "again"}, &res) == nil
	}, eventually, 10*time.Millisecond)
	require.Equal(t, "again", *res.Success)
}

func TestSweepTick(t *testing.T) {
	cases := []struct {
		name                string
		handshake, idle, rd time.Duration
		want                time.Duration
	}{
		{"defaults", server.DefaultHandshakeTimeout, server.DefaultIdleTimeout, server.DefaultReadGrace, time.Second},
		{"short", 200 * time.Millisecond, time.Second, 0, 20 * time.Millisecond},
		{"tiny", time.Millisecond, 0, 0, 10 * time.Millisecond},
		{"off", 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, server.SweepTick(tc.handshake, tc.idle, tc.rd))
		})
	}
}

// What an Apache Thrift client sees of the time limits (documented in
// docs/design/runtime.md): a connection it opened and did not use within
// the handshake timeout, or left idle, is closed, and its next call fails
// with a transport error; reopening the transport serves it again. Apache
// clients do not reconnect by themselves.
func TestApacheClientAfterIdleClose(t *testing.T) {
	const limit = time.Minute
	cases := []struct {
		name     string
		callOnce bool // idle after one call; else never used
		reason   string
	}{
		{"opened and not used", false, "handshake_timeout"},
		{"idle after a call", true, "idle_timeout"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := startSwept(t, server.WithHandshakeTimeout(limit), server.WithIdleTimeout(limit))
			now := t0 + time.Duration(i+1)*time.Hour
			server.Sweep(s, now)
			conf := &thrift.TConfiguration{ConnectTimeout: testenv.HangGuard(time.Second), SocketTimeout: testenv.HangGuard(5 * time.Second)}
			tr := thrift.NewTFramedTransportConf(thrift.NewTSocketConf(addr, conf), conf)
			require.NoError(t, tr.Open())
			defer tr.Close()
			p := thrift.NewTBinaryProtocolConf(tr, conf)
			cl := thrift.NewTStandardClient(p, p)
			call := func() error {
				var res wiretest.ApacheEchoResult
				_, err := cl.Call(tctx(t), "echo", &wiretest.ApacheEchoArgs{Msg: "a"}, &res)
				if err == nil {
					require.Equal(t, "a", *res.Success)
				}
				return err
			}
			if tc.callOnce {
				require.NoError(t, call())
				onlyConn(t, s, inPhase(server.PhIdle))
			} else {
				onlyConn(t, s, inPhase(server.PhHandshake))
			}
			// The connection may stamp its last activity just after it is
			// seen in its phase, i.e. after a sweep; each later sweep is
			// another limit on, so one finds it over the limit.
			k := time.Duration(0)
			require.Eventually(t, func() bool {
				k++
				server.Sweep(s, now+k*limit)
				return len(server.Conns(s)) == 0
			}, eventually, time.Millisecond)
			require.Equal(t, 1.0, closedBy(t, s, tc.reason))
			var te thrift.TTransportException
			require.ErrorAs(t, call(), &te, "the next call fails")
			require.NoError(t, tr.Close())
			require.NoError(t, tr.Open())
			require.NoError(t, call(), "a reopened transport is served")
		})
	}
}

// A request waiting for memory (the server's doing) is not closed by the
// time limits however long it waits, and is served once memory is free.
func TestBudgetWaitIsNotSlow(t *testing.T) {
	e := wiretest.NewEcho()
	s := server.New(server.WithLogger(quiet), server.WithMemoryBudget(300<<10, 300<<10),
		server.WithMinReadRate(time.Second, 1<<20), server.WithIdleTimeout(time.Second))
	server.ManualSweep(s)
	server.Sweep(s, t0)
	s.Register(e.Service())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(ln) }()
	defer s.Close()
	addr := ln.Addr().String()

	release := holdBudget(t, s, e, addr, 200<<10)
	nc, br := rawHello(t, addr)
	defer nc.Close()
	codec := wire.GetCodec()
	f, err := codec.AppendMessage(make([]byte, wire.HeaderSize), proto.Binary, "echo", proto.Call, 7,
		&wiretest.EchoArgs{Msg: "w", Blob: make([]byte, 200<<10)})
	wire.PutCodec(codec)
	require.NoError(t, err)
	wire.SealFrame(f, wire.KindCall, 0, 7, 0)
	_, err = nc.Write(f)
	require.NoError(t, err)
	waiting := func(st server.ConnState) bool { return st.Phase == server.PhBusy && st.Inflight == 0 && st.InBytes > 0 }
	require.Eventually(t, func() bool {
		for _, st := range server.Conns(s) {
			if waiting(st) {
				return true
			}
		}
		return false
	}, eventually, time.Millisecond)
	server.Sweep(s, t0+time.Hour)
	for _, st := range server.Conns(s) {
		require.Empty(t, st.Closing)
	}
	release()
	h, _, err := wire.ReadFrame(br, nil, 1<<20)
	require.NoError(t, err)
	require.Equal(t, wire.KindReply, h.Kind)
	require.Equal(t, int32(7), h.Seqid)
}
