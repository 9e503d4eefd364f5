//go:build cgo && linux

package client_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// echoStreams registers S.echo, a bidirectional stream echoing each
// message.
func echoStreams(ts *testServer) {
	ts.srv.Register(&server.Service{Name: "S", Methods: []server.Method{{
		Name: "echo", Stream: stream.Bidi,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err == io.EOF {
					return nil, nil
				} else if err != nil {
					return nil, err
				}
				if err := ss.SendMsg(&a); err != nil {
					return nil, err
				}
			}
		},
	}}})
}

// A function whose calls take a lane streams beside lane calls.
func TestStreamBesideLanes(t *testing.T) {
	ts := laneServer(t)
	echoStreams(ts)
	c := dial(t, ts.addr, client.WithMultiplexed()) // "echo" alone is the Echo service's
	echoOnLanes(t, ts, c, methodWith(hints.Set{}))
	m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi,
		Hints: &hints.Function{Name: "echo", Client: hints.Set{}}}
	require.Equal(t, fastpathtest.Transport(), c.Plan("S:echo").Transport.String(), "its calls would take a lane")
	st, err := c.NewStream(tctx(t), m, &wiretest.EchoResult{})
	require.NoError(t, err)
	for _, n := range []int{1, 5000, 200 << 10} {
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strings.Repeat("y", n)}))
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Len(t, a.Msg, n)
	}
	require.NoError(t, st.CloseSend())
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Equal(t, 3.0, serverCounter(t, ts, "hatrpc_server_stream_messages_total", map[string]string{"function": "echo", "direction": "in"}))
}

// Both lanes of a bidirectional stream, whose answers wait on the
// server's goroutines (the first lane's polls on its handler, the
// second's frames on its lane goroutine), park their waits while the
// stream lasts (a thread spinning or blocked in C for such an answer kept
// the cores or threads the stream's goroutines needed) and get their
// spin back, by put, before RecvMsg sees the end.
func TestDuplexStreamLanesBlockWaits(t *testing.T) {
	ts := laneServer(t)
	echoStreams(ts)
	c := dial(t, ts.addr, client.WithMultiplexed()) // "echo" alone is the Echo service's
	m := &client.Method{Service: "S", Name: "echo", Stream: stream.Bidi}
	for i := range 2 { // the second stream takes the lanes the first gave back
		st, err := c.NewStream(tctx(t), m, &wiretest.EchoResult{})
		require.NoError(t, err)
		require.Equal(t, 2, client.BlockedLaneWaits(c), "stream %d", i)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "x"}))
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, "x", a.Msg)
		require.NoError(t, st.CloseSend())
		require.Equal(t, io.EOF, st.RecvMsg(&a))
		require.Zero(t, client.BlockedLaneWaits(c), "stream %d", i)
	}
	lane, tcp := c.StreamRoutes()
	require.Equal(t, uint64(2), lane)
	require.Zero(t, tcp)
}
