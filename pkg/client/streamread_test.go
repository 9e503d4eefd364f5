package client_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// paceMethod is pace's server stream: the request's Mode messages, each
// sent once the test lets the handler go on (paceServer.step), then a
// clean end.
var paceMethod = &client.Method{Service: "Pace", Name: "pace", Stream: stream.Server}

type paceServer struct {
	step  chan struct{} // nil: the handler sends without waiting
	stepB chan struct{} // the steps of a stream whose request says "b"
	done  chan error    // the handler's end
}

// servePace serves the echo service and Pace; gated makes the handler
// wait for a step before each message.
func servePace(t *testing.T, gated bool) (*testServer, *paceServer) {
	ts := serve(t, "")
	ps := &paceServer{done: make(chan error, 4)}
	if gated {
		ps.step, ps.stepB = make(chan struct{}), make(chan struct{})
	}
	ts.srv.Register(&server.Service{Name: "Pace", Methods: []server.Method{{
		Name: "pace", Stream: stream.Server,
		NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var req wiretest.EchoArgs
			if err := ss.RecvMsg(&req); err != nil {
				return nil, err
			}
			step := ps.step
			if req.Msg == "b" {
				step = ps.stepB
			}
			err := func() error {
				for i := range int(req.Mode) {
					if step != nil {
						select {
						case <-step:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					if err := ss.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: make([]byte, 100)}); err != nil {
						return err
					}
				}
				return nil
			}()
			ps.done <- err
			return nil, err
		},
	}}})
	return ts, ps
}

// openPace opens a pace stream of n messages.
func openPace(t *testing.T, ctx context.Context, c *client.Conn, n int) client.Stream {
	return openPaceAs(t, ctx, c, n, "")
}

// openPaceAs opens a pace stream of n messages whose handler takes its
// steps from paceServer.stepB when name is "b".
func openPaceAs(t *testing.T, ctx context.Context, c *client.Conn, n int, name string) client.Stream {
	st, err := c.NewStream(ctx, paceMethod, &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: int32(n), Msg: name}))
	require.NoError(t, st.CloseSend())
	return st
}

// waitRole yields until the read role of c's connection is role; the
// test's hang guard bounds it.
func waitRole(t *testing.T, ctx context.Context, c *client.Conn, role string) {
	for client.StreamReadRole(c) != role {
		if ctx.Err() != nil {
			t.Fatalf("the read role stayed %q, want %q", client.StreamReadRole(c), role)
		}
		runtime.Gosched()
	}
}

func recvPace(t *testing.T, st client.Stream, i int) {
	var m wiretest.EchoArgs
	require.NoError(t, st.RecvMsg(&m))
	require.Equal(t, strconv.Itoa(i), m.Msg)
}

// A server stream that is its connection's only one reads its messages
// in RecvMsg's goroutine: the reader goroutine files the first and parks
// the read role with the stream, and every later frame is read by its
// consumer; after the end nobody holds the role.
func TestStreamConsumerReadsItself(t *testing.T) {
	ts, _ := servePace(t, false)
	c := dial(t, ts.addr)
	ctx := tctx(t)
	const n = 200
	st := openPace(t, ctx, c, n)
	for i := range n {
		recvPace(t, st, i)
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.GreaterOrEqual(t, client.StreamSelfReads(c), int64(n-1))
	require.NotEqual(t, "parked", client.StreamReadRole(c))
	requireEcho(t, ctx, c, "after")
}

// Calls on the connection are not held up by a stream's consumer: one
// made while the consumer waits in RecvMsg, reading, gets its reply
// through that read; one made while the role is parked (the consumer
// away) takes the role itself; the stream goes on after both, read by
// its consumer again.
func TestStreamReadRoleAndCalls(t *testing.T) {
	ts, ps := servePace(t, true)
	c := dial(t, ts.addr)
	ctx := tctx(t)
	const n = 4
	st := openPace(t, ctx, c, n)
	ps.step <- struct{}{}
	recvPace(t, st, 0)
	waitRole(t, ctx, c, "parked")

	// Parked: the call reads its own reply.
	requireEcho(t, ctx, c, "parked")

	ps.step <- struct{}{}
	recvPace(t, st, 1)
	waitRole(t, ctx, c, "parked")

	// The consumer reading: the call's reply comes through its read.
	got := make(chan error, 1)
	go func() {
		var m wiretest.EchoArgs
		err := st.RecvMsg(&m)
		if err == nil && m.Msg != "2" {
			err = errors.New("message " + m.Msg + ", want 2")
		}
		got <- err
	}()
	waitRole(t, ctx, c, "stream")
	requireEcho(t, ctx, c, "reading")
	ps.step <- struct{}{}
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("RecvMsg did not return")
	}
	ps.step <- struct{}{}
	recvPace(t, st, 3)
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.NoError(t, <-ps.done)
}

// A consumer reading when its stream ends on this side (its context
// canceled) or its connection closes is interrupted: RecvMsg returns
// why, the read role goes back, the server's handler ends, and (after a
// cancel) the connection's calls go on.
func TestStreamReadRoleEnds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		end   func(cancel context.CancelFunc, c *client.Conn)
		check func(t *testing.T, err error)
	}{
		{"cancel", func(cancel context.CancelFunc, _ *client.Conn) { cancel() },
			func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) }},
		{"conn closed", func(_ context.CancelFunc, c *client.Conn) { require.NoError(t, c.Close()) },
			func(t *testing.T, err error) {
				var ce *client.ConnError
				require.ErrorAs(t, err, &ce)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, ps := servePace(t, true)
			c := dial(t, ts.addr)
			ctx := tctx(t)
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st := openPace(t, sctx, c, 3)
			ps.step <- struct{}{}
			recvPace(t, st, 0)
			waitRole(t, ctx, c, "parked")
			got := make(chan error, 1)
			go func() { got <- st.RecvMsg(&wiretest.EchoArgs{}) }()
			waitRole(t, ctx, c, "stream")
			tt.end(cancel, c)
			select {
			case err := <-got:
				tt.check(t, err)
			case <-ctx.Done():
				t.Fatal("RecvMsg did not return")
			}
			select {
			case err := <-ps.done:
				require.Error(t, err)
			case <-ctx.Done():
				t.Fatal("the handler did not end")
			}
			if tt.name == "cancel" {
				require.NotEqual(t, "stream", client.StreamReadRole(c))
				requireEcho(t, ctx, c, "after")
			}
		})
	}
}

// A stream's deadline ends it while its consumer reads (or, on a slow
// host, before: the outcome is the same): RecvMsg returns
// context.DeadlineExceeded and the connection's calls go on.
func TestStreamReadRoleDeadline(t *testing.T) {
	ts, ps := servePace(t, true)
	c := dial(t, ts.addr)
	ctx := tctx(t)
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	st := openPace(t, sctx, c, 3)
	select {
	case ps.step <- struct{}{}:
	case <-sctx.Done():
	}
	var m wiretest.EchoArgs
	err := st.RecvMsg(&m)
	if err == nil {
		require.Equal(t, "0", m.Msg)
		err = st.RecvMsg(&m) // no step: it waits, reading, for the deadline
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireEcho(t, ctx, c, "after")
}

// A second stream opened while the first's consumer holds the read role
// parked gets its messages (the open starts the reader goroutine), and
// both streams go on to their ends.
func TestStreamReadRoleSecondStream(t *testing.T) {
	ts, ps := servePace(t, true)
	c := dial(t, ts.addr)
	ctx := tctx(t)
	a := openPace(t, ctx, c, 2)
	ps.step <- struct{}{}
	recvPace(t, a, 0)
	waitRole(t, ctx, c, "parked")
	b := openPaceAs(t, ctx, c, 2, "b")
	for i := range 2 {
		ps.stepB <- struct{}{}
		recvPace(t, b, i)
	}
	require.Equal(t, io.EOF, b.RecvMsg(&wiretest.EchoArgs{}))
	ps.step <- struct{}{}
	recvPace(t, a, 1)
	require.Equal(t, io.EOF, a.RecvMsg(&wiretest.EchoArgs{}))
	require.NoError(t, <-ps.done)
	require.NoError(t, <-ps.done)
}

// A server that goes away while the read role is parked with a stream
// (nobody reads) is found by the stream's next RecvMsg: it returns an
// error rather than wait.
func TestStreamReadRoleServerGone(t *testing.T) {
	ts, ps := servePace(t, true)
	c := dial(t, ts.addr)
	ctx := tctx(t)
	st := openPace(t, ctx, c, 3)
	ps.step <- struct{}{}
	recvPace(t, st, 0)
	waitRole(t, ctx, c, "parked")
	ts.stop()
	got := make(chan error, 1)
	go func() { got <- st.RecvMsg(&wiretest.EchoArgs{}) }()
	select {
	case err := <-got:
		require.Error(t, err)
		require.NotEqual(t, io.EOF, err)
	case <-ctx.Done():
		t.Fatal("RecvMsg did not return")
	}
}
