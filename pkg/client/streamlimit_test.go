//go:build cgo && linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A stream's data message past the message limit is not built, as a
// unary reply is not: SendMsg, the server's or the client's, on TCP and
// on a lane, encodes it within the limit and only counts the rest, so 32
// times the limit of 1 KiB strings, i64s, enums or i32-to-double entries
// (shapes) costs about the limit (the message was built whole before, then refused:
// 32 MiB of i64s allocated about 200 MB). SendMsg returns a
// *stream.TooLargeError naming the message's exact size and the limit;
// nothing of the message was sent, no credit taken, so the stream goes
// on (the next message and the end arrive) and so does its connection.
// The server counts each of its refusals (rejected_total, reason
// stream_message_too_large).
func TestStreamMsgNotBuiltPastLimit(t *testing.T) {
	const boundFactor = 8
	for _, rc := range tcpAndLane {
		for _, sender := range []string{"server", "client"} {
			t.Run(rc.name+"/"+sender, func(t *testing.T) {
				ts := rc.serve(t, server.WithLimits(replyLimits))
				refused := make(chan error, 1)
				ts.srv.Register(shapeStreams(refused))
				c := dial(t, ts.addr, client.WithLimits(replyLimits))
				m := &client.Method{Service: "Shapes", Name: "shapes", Stream: stream.Bidi}
				for i, sh := range shapes {
					t.Run(sh.name, func(t *testing.T) {
						ctx := countCtx(t)
						st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
						require.NoError(t, err)
						require.Equal(t, 10, shapeRoundTrip(t, st, sh.name, 10)) // warm the route up
						items := 32 * replyLimit / sh.each
						var before, after runtime.MemStats
						runtime.GC()
						runtime.ReadMemStats(&before)
						if sender == "server" {
							require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: sh.name, DelayNs: int64(items), Mode: 1}))
							select {
							case err = <-refused:
							case <-ctx.Done():
								t.Fatal("the handler's SendMsg did not return")
							}
						} else {
							err = st.SendMsg(shapeMsg(sh.name, items))
						}
						runtime.ReadMemStats(&after)
						alloc := after.TotalAlloc - before.TotalAlloc
						sizes := shapeSizes(sh.name, items)
						t.Logf("message of %d bytes, limit %d: %d bytes allocated", sizes[0], replyLimit, alloc)
						require.Less(t, alloc, uint64(boundFactor*replyLimit))
						var tl *stream.TooLargeError
						require.ErrorAs(t, err, &tl)
						require.ErrorIs(t, err, proto.ErrSizeLimit)
						require.Contains(t, sizes, tl.Size, "the message's exact size")
						require.Equal(t, replyLimit, tl.Limit)
						require.EqualError(t, err, fmt.Sprintf("stream: message of %d bytes exceeds the message limit of %d bytes", tl.Size, replyLimit))
						// The server counts its own refusals, one a shape.
						refusals := 0.0
						if sender == "server" {
							refusals = float64(i + 1)
						}
						require.Equal(t, refusals, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "stream_message_too_large"}))
						// The stream goes on, to its end.
						require.Equal(t, 1000, shapeRoundTrip(t, st, sh.name, 1000))
						require.NoError(t, st.CloseSend())
						require.Equal(t, io.EOF, st.RecvMsg(&scalarResult{}))
						lane, tcp := c.StreamRoutes()
						if rc.lanes {
							require.Equal(t, [2]uint64{uint64(i + 1), 0}, [2]uint64{lane, tcp}, "lane, tcp")
						} else {
							require.Zero(t, lane)
						}
					})
				}
			})
		}
	}
}

// shapeStreams is Shapes:shapes, a bidirectional stream answering each
// EchoArgs{Msg: shape, DelayNs: n} with n values of the shape
// (shapeMsg); with Mode 1 it puts SendMsg's error on refused and goes on.
func shapeStreams(refused chan<- error) *server.Service {
	return &server.Service{Name: "Shapes", Methods: []server.Method{{
		Name: "shapes", Stream: stream.Bidi,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			for {
				var a wiretest.EchoArgs
				if err := ss.RecvMsg(&a); err == io.EOF {
					return nil, nil
				} else if err != nil {
					return nil, err
				}
				err := ss.SendMsg(shapeMsg(a.Msg, int(a.DelayNs)))
				if a.Mode == 1 {
					refused <- err
				} else if err != nil {
					return nil, err
				}
			}
		},
	}}}
}

// shapeRoundTrip asks the stream for n values of shape and returns how
// many came.
func shapeRoundTrip(t *testing.T, st client.Stream, shape string, n int) int {
	t.Helper()
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: shape, DelayNs: int64(n)}))
	var res scalarResult
	require.NoError(t, st.RecvMsg(&res))
	return res.n
}

// shapeSizes is the data message's size for n values of shape, in
// binary and compact.
func shapeSizes(shape string, n int) []int {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	var sizes []int
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		b, err := codec.AppendStruct(nil, p, shapeMsg(shape, n))
		if err != nil {
			panic(errors.Join(fmt.Errorf("%s of %d", shape, n), err))
		}
		sizes = append(sizes, len(b))
	}
	return sizes
}
