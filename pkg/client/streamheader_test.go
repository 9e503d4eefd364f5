//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A server stream's header block sent on its own (SendHeader) is a data
// frame as a message is, and is held to the same message limit: a block
// past it is not sent (it went out before: SendHeader returned nil and
// the stream failed, over TCP with its connection, "wire: frame too
// large", on a lane "rdma: closed"). SendHeader returns the
// *stream.TooLargeError naming the block's exact size; nothing was sent,
// so the handler may send a smaller header, the stream goes on to its
// end, its connection goes on, and the server counts the refusal.
func TestStreamHeaderPastLimit(t *testing.T) {
	big := metadata.MD{"big": strings.Repeat("h", 2*replyLimit)}
	small := metadata.MD{"k": "v"}
	size := len(wire.AppendHeaderBlock(nil, big))
	for _, rc := range tcpAndLane {
		t.Run(rc.name, func(t *testing.T) {
			ts := rc.serve(t, server.WithLimits(replyLimits))
			refused := make(chan error, 1)
			ts.srv.Register(&server.Service{Name: "Head", Methods: []server.Method{{
				Name: "head", Stream: stream.Server,
				NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
				HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
					// The request first (see TestStreamTrailerPastLimit).
					if err := ss.RecvMsg(new(wiretest.EchoArgs)); err != nil {
						return nil, err
					}
					refused <- ss.SendHeader(big)
					if err := ss.SendHeader(small); err != nil {
						return nil, err
					}
					return nil, ss.SendMsg(shapeMsg("i64-list", 10))
				},
			}}})
			c := dial(t, ts.addr, client.WithLimits(replyLimits))
			ctx := countCtx(t)
			m := &client.Method{Service: "Head", Name: "head", Stream: stream.Server}
			st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
			require.NoError(t, err)
			require.NoError(t, st.SendMsg(&wiretest.EchoArgs{}))
			require.NoError(t, st.CloseSend())
			select {
			case err = <-refused:
			case <-ctx.Done():
				t.Fatal("the handler's SendHeader did not return")
			}
			var tl *stream.TooLargeError
			require.ErrorAs(t, err, &tl)
			require.ErrorIs(t, err, proto.ErrSizeLimit)
			require.EqualError(t, err, fmt.Sprintf("stream: message of %d bytes exceeds the message limit of %d bytes", size, replyLimit))
			md, err := st.Header()
			require.NoError(t, err)
			require.Equal(t, small, md)
			var res scalarResult
			require.NoError(t, st.RecvMsg(&res))
			require.Equal(t, 10, res.n)
			require.Equal(t, io.EOF, st.RecvMsg(&res))
			require.Equal(t, 1.0, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "stream_message_too_large"}))
			// The connection goes on.
			var out wiretest.EchoResult
			require.NoError(t, c.Call(ctx, methodWith(hints.Set{}), &wiretest.EchoArgs{Msg: "after"}, &out))
			require.Equal(t, "after", *out.Success)
			lane, _ := c.StreamRoutes()
			require.Equal(t, rc.lanes, lane == 1, "the stream's route")
		})
	}
}
