package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestConcurrentPipelinedCalls(t *testing.T) {
	ts := serve(t, "")
	for _, opts := range [][]client.Option{nil, {client.WithCompact()}, {client.WithoutUpgrade(), client.WithFramed()}} {
		c := dial(t, ts.addr, opts...)
		var wg sync.WaitGroup
		for g := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					msg := fmt.Sprintf("%d/%d", g, i)
					got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: msg})
					if assert.NoError(t, err) {
						assert.Equal(t, msg, got)
					}
				}
			}()
		}
		wg.Wait()
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "before"})
	require.NoError(t, err)
	require.Equal(t, "before", got)

	inflight := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "hang", Mode: wiretest.ModeWaitCtx})
			inflight <- err
		}()
	}
	for range 3 { // every call is in flight (at its handler) when the server dies
		recvWithin(t, ts.echo.Waiting, 5*time.Second, "the calls did not reach the server")
	}
	ts.stop()
	for range 3 {
		err := recvWithin(t, inflight, 5*time.Second, "in-flight call hangs after the server died")
		require.ErrorIs(t, err, client.ErrConnClosed)
		var ce *client.ConnError
		require.ErrorAs(t, err, &ce)
	}
	// While the server is down, calls fail fast with the typed error.
	_, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "down"})
	require.ErrorIs(t, err, client.ErrConnClosed)

	serve(t, ts.addr) // same port
	got, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "after"})
	require.NoError(t, err)
	require.Equal(t, "after", got)
	require.True(t, c.Upgraded())
}

func TestCloseFailsPendingAndLaterCalls(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	pending := make(chan error, 1)
	go func() {
		_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "p", Mode: wiretest.ModeWaitCtx})
		pending <- err
	}()
	waitHeld(t, ts, "p") // the call is at the server, its reply pending, when Close comes
	require.NoError(t, c.Close())
	require.ErrorIs(t, awaitCall(t, pending, "Close left a pending call waiting"), client.ErrConnClosed)
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "late"})
	require.ErrorIs(t, err, client.ErrConnClosed)
	require.NoError(t, c.Close()) // idempotent
}

func TestTimeouts(t *testing.T) {
	// The server answers "slow" only once the test lets it, after the call
	// gave up: only the call's own timeout (50 ms) can end it, whatever
	// the host's speed (a hang guard bounds the wait instead of a
	// wall-clock bet on how soon it returns), and its reply always comes
	// late.
	slow := &wiretest.EchoArgs{Msg: "slow"}
	cases := []struct {
		name string
		opts []client.Option
		m    *client.Method
	}{
		{"call-timeout-option", []client.Option{client.WithCallTimeout(50 * time.Millisecond)}, wiretest.EchoMethod},
		{"hint-timeout", nil, &client.Method{Service: "Echo", Name: "echo",
			Hints: &hints.Function{Name: "echo", Client: hints.Set{Timeout: 50 * time.Millisecond}}}},
		{"plain-call-timeout", []client.Option{client.WithoutUpgrade(), client.WithCallTimeout(50 * time.Millisecond)}, wiretest.EchoMethod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			gate := func(ctx context.Context, _ *server.CallInfo, args proto.Struct, next server.Handler) (proto.Struct, error) {
				if a, ok := args.(*wiretest.EchoArgs); ok && a.Msg == slow.Msg {
					<-release
				}
				return next(ctx, args)
			}
			ts := serve(t, "", server.WithInterceptors(gate))
			c := dial(t, ts.addr, tc.opts...)
			t.Cleanup(free) // first: the server's close waits for the held handler
			err := awaitCall(t, callAsync(func() error { return c.Call(context.Background(), tc.m, slow, &wiretest.EchoResult{}) }),
				"the call outlived its timeout")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, client.ErrNotSent, "it was sent, and may have run")
			free()
			// A late reply to the abandoned call does not confuse later ones.
			got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "next"})
			require.NoError(t, err)
			require.Equal(t, "next", got)
		})
	}
	t.Run("expired-context", func(t *testing.T) {
		c := dial(t, serve(t, "").addr)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "x"})
		require.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, client.ErrNotSent)
		assert.EqualError(t, err, "context canceled")
	})
}

func TestClientInterceptors(t *testing.T) {
	ts := serve(t, "")
	var trace []string
	mk := func(tag string) client.Interceptor {
		return func(ctx context.Context, m *client.Method, args, result proto.Struct, next client.Invoker) error {
			trace = append(trace, tag+">"+m.Name)
			err := next(ctx, m, args, result)
			trace = append(trace, fmt.Sprintf("%s<%v", tag, err))
			return err
		}
	}
	c := dial(t, ts.addr, client.WithInterceptors(mk("a"), mk("b")))
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "x"})
	require.NoError(t, err)
	require.Equal(t, []string{"a>echo", "b>echo", "b<<nil>", "a<<nil>"}, trace)
}

func TestPlan(t *testing.T) {
	svc := &hints.Service{Name: "Echo", Functions: []hints.Function{
		{Name: "echo", Client: hints.Set{PerfGoal: hints.Throughput, Transport: hints.TransportRDMA}},
		{Name: "bulk", Client: hints.Set{Transport: hints.TransportTCP, PayloadSize: 1 << 20}},
	}}
	ts := serve(t, "")
	c := dial(t, ts.addr, client.WithHints(svc))
	cases := []struct {
		method  string
		goal    hints.Goal
		payload int
	}{
		{"echo", hints.Throughput, 0},
		{"Echo:echo", hints.Throughput, 0},
		{"bulk", hints.Latency, 1 << 20},
		{"unknown", hints.Latency, 0},
	}
	for _, tc := range cases {
		p := c.Plan(tc.method)
		require.Equal(t, tc.goal, p.Goal, tc.method)
		require.Equal(t, tc.payload, p.PayloadSize, tc.method)
		// A server without a fast path grants TCP: one TCP row.
		require.Equal(t, hints.TransportTCP, p.Transport, tc.method)
		require.Equal(t, []hints.Row{{Max: hints.NoBound, Route: hints.RouteTCP, Polling: p.Polling}}, p.Rows, tc.method)
	}
	// Hints seen in calls feed Plan too.
	m := &client.Method{Service: "Echo", Name: "echo2", Hints: &hints.Function{Name: "echo2", Client: hints.Set{PerfGoal: hints.ResUtil}}}
	_ = c.Call(tctx(t), m, &wiretest.EchoArgs{}, &wiretest.EchoResult{})
	require.Equal(t, hints.ResUtil, c.Plan("echo2").Goal)
}

func TestDialErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	// A hang guard, and the deadline the handshake timeout must beat
	// (checked below), so far beyond 100 ms that no host's speed decides.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(10*time.Second))
	defer cancel()
	_, err = client.Dial(ctx, addr)
	require.ErrorIs(t, err, client.ErrConnClosed)
	_, err = client.Dial(ctx, addr, client.WithProtocol(proto.Protocol(9)))
	require.Error(t, err)

	// A peer that accepts and never answers: the handshake times out.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- nc
		}
	}()
	_, err = client.Dial(ctx, ln.Addr().String(), client.WithHandshakeTimeout(100*time.Millisecond))
	require.ErrorIs(t, err, client.ErrConnClosed)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a timeout is a deadline, as a call's is")
	require.NoError(t, ctx.Err(), "the handshake timeout ended the dial, not the caller's deadline")
	// The caller's deadline passing in the handshake: the same.
	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = client.Dial(dctx, ln.Addr().String())
	dcancel()
	require.ErrorIs(t, err, client.ErrConnClosed)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	ln.Close()
	for nc := range accepted {
		nc.Close()
	}
}

func TestReconnectAfterGracefulShutdown(t *testing.T) {
	ts := serve(t, "")
	c := dial(t, ts.addr)
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "one"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
	defer cancel()
	require.NoError(t, ts.srv.Shutdown(ctx))
	ts.stop()
	serve(t, ts.addr)
	var got string
	for range 2 { // the first call may still race with the old connection's close
		if got, err = echo(tctx(t), c, &wiretest.EchoArgs{Msg: "two"}); err == nil {
			break
		}
		require.ErrorIs(t, err, client.ErrConnClosed)
	}
	require.NoError(t, err)
	require.Equal(t, "two", got)
}

// A server that accepts but never reads cannot block a caller forever.
func TestWriteTimeoutOnStuckServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
		close(accepted)
	}()
	c := dial(t, ln.Addr().String(), client.WithoutUpgrade(), client.WithWriteTimeout(200*time.Millisecond))
	// Only the write timeout can end the call (its context never ends):
	// the bound is a hang guard, as encoding 64 MiB on an emulated host
	// takes what it takes.
	err = awaitCall(t, callAsync(func() error {
		_, err := echo(context.Background(), c, &wiretest.EchoArgs{Msg: "big", Blob: make([]byte, 64<<20)})
		return err
	}), "the write to a server that never reads did not time out")
	require.ErrorIs(t, err, client.ErrConnClosed)
	require.NoError(t, c.Close())
	require.NoError(t, ln.Close())
	for nc := range accepted {
		nc.Close()
	}
}

// While one caller is stuck reconnecting, the others still honour their
// own deadlines.
func TestSlowReconnectDoesNotBlockOthers(t *testing.T) {
	ts := serve(t, "")
	var dials atomic.Int32
	release := make(chan struct{})
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
		select {
		case <-release:
			return nil, errors.New("dial refused by test")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := dial(t, ts.addr, client.WithDialer(dialer))
	_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "up"})
	require.NoError(t, err)
	ts.stop()
	require.Eventually(t, func() bool { return !c.Upgraded() }, testenv.HangGuard(5*time.Second), 10*time.Millisecond)

	slow := make(chan error, 1)
	go func() {
		_, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "dials"})
		slow <- err
	}()
	require.Eventually(t, func() bool { return dials.Load() >= 2 }, testenv.HangGuard(5*time.Second), 5*time.Millisecond)
	// The other caller's dial ends only at release, after this call: a
	// call blocked behind it would hang (the guard fails it), one that
	// honours its own deadline returns.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = awaitCall(t, callAsync(func() error { _, err := echo(ctx, c, &wiretest.EchoArgs{Msg: "waits"}); return err }),
		"the call waited for the other caller's reconnect")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	require.ErrorIs(t, <-slow, client.ErrConnClosed)
}
