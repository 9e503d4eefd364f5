//go:build cgo && linux

package client_test

import (
	"bytes"
	"context"
	"fmt"
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

// blobStreams registers S.blobs, a server stream of Mode messages of
// 64 KiB (message i's blob all byte(i+1)), then a clean end; ended gets
// each handler's outcome.
func blobStreams(ts *testServer) (ended chan error) {
	ended = make(chan error, 4)
	ts.srv.Register(&server.Service{Name: "S", Methods: []server.Method{{
		Name: "blobs", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			err := ss.RecvMsg(&a)
			for i := 0; err == nil && i < int(a.Mode); i++ {
				err = ss.SendMsg(&wiretest.EchoArgs{Blob: bytes.Repeat([]byte{byte(i + 1)}, 64<<10)})
			}
			ended <- err
			return nil, err
		},
	}}})
	return ended
}

func blobMethod(borrow bool) *client.Method {
	m := &client.Method{Service: "S", Name: "blobs", Stream: stream.Server}
	if borrow {
		m.Hints = &hints.Function{Name: "blobs", Client: hints.Set{BorrowMsgs: true}}
	}
	return m
}

// checkBlob says how a received message i of S.blobs differs.
func checkBlob(a *wiretest.EchoArgs, i int) error {
	if len(a.Blob) != 64<<10 {
		return fmt.Errorf("message %d: %d bytes", i, len(a.Blob))
	}
	for k, c := range a.Blob {
		if c != byte(i+1) {
			return fmt.Errorf("message %d: byte %d is %d, want %d", i, k, c, byte(i+1))
		}
	}
	return nil
}

// A server stream's borrowed large messages are read in place in the
// lane's reply, each right until the next RecvMsg (the lane's next
// exchange waits for it), and the lane is back for the next stream once
// it ended; owned ones are copied out.
func TestServerStreamBorrowedInPlace(t *testing.T) {
	// n: six windows (the default 1 MiB: windowMsgs messages of 64 KiB).
	const n, windowMsgs = 100, 16
	tests := []struct {
		name   string
		borrow bool
		copts  []client.Option
	}{
		{"borrowed", true, nil},
		{"owned", false, nil},
		{"hint ignored", true, []client.Option{client.WithOwnedMsgs()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := laneServer(t)
			blobStreams(ts)
			c := dial(t, ts.addr, append([]client.Option{client.WithMultiplexed()}, tt.copts...)...)
			for round := range 2 { // the second stream takes the lane the first gave back
				before, drivenBefore := client.LentStreamMsgs(c), client.CallerExchanges(c)
				st, err := c.NewStream(tctx(t), blobMethod(tt.borrow), &wiretest.EchoResult{})
				require.NoError(t, err)
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n}))
				require.NoError(t, st.CloseSend())
				var prev *wiretest.EchoArgs
				for i := 0; ; i++ {
					if prev != nil {
						require.NoError(t, checkBlob(prev, i-1), "before the next RecvMsg")
					}
					a := new(wiretest.EchoArgs)
					if err := st.RecvMsg(a); err == io.EOF {
						require.Equal(t, n, i)
						break
					} else {
						require.NoError(t, err)
					}
					require.NoError(t, checkBlob(a, i))
					prev = a
				}
				// All but those of the reply that ends the stream (at most a
				// window's: the lane is back at once, for others to overwrite).
				lent := client.LentStreamMsgs(c) - before
				// A reply read in place is followed by an exchange its
				// caller runs (stream_lanedrive.go) unless the runner
				// took its turn back first; never without one.
				driven := client.CallerExchanges(c) - drivenBefore
				if tt.borrow && tt.copts == nil {
					require.GreaterOrEqual(t, lent, uint64(n-windowMsgs), "round %d", round)
					require.LessOrEqual(t, lent, uint64(n), "round %d", round)
					require.LessOrEqual(t, driven, lent, "round %d", round)
				} else {
					require.Zero(t, lent, "round %d", round)
					require.Zero(t, driven, "round %d", round)
				}
				require.Equal(t, 1, client.LanesOpen(c), "round %d", round)
			}
			lane, tcp := c.StreamRoutes()
			require.Equal(t, uint64(2), lane)
			require.Zero(t, tcp)
		})
	}
}
