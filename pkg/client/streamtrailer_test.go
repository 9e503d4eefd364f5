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

// A server stream's trailer (SetTrailer) goes in its end frame with the
// final, and the frame is held to the message limit: the final gets what
// the trailer block leaves. Before, neither was held: a trailer past the
// limit, or a trailer and a final each within it but not together, went
// out in a frame the client took for a broken connection over TCP
// ("wire: frame too large", every stream and call on it failed) and a
// lane could not send ("rdma: closed"). Now a trailer past the limit on
// its own is dropped and the stream ends with an exception naming its
// size; a final that does not fit beside the trailer is refused as one
// past the limit is (the trailer goes with the refusal if it fits
// beside it). Either is counted as a refused reply, the connection goes
// on, and a trailer and a final filling the limit exactly go out whole.
func TestStreamTrailerPastLimit(t *testing.T) {
	const name = "trail"
	codec := wire.GetCodec()
	finalSize := func(s string) int { // the final's message: binary, whose seqid takes 4 bytes whatever it is
		b, err := codec.AppendMessage(nil, proto.Binary, name, proto.Reply, 1, &wiretest.EchoResult{Success: &s})
		require.NoError(t, err)
		return len(b)
	}
	half := strings.Repeat("f", replyLimit/2)
	okSize, halfSize := finalSize("ok"), finalSize(half)
	wire.PutCodec(codec)
	// trailerOf is a trailer whose block takes exactly size bytes.
	trailerOf := func(size int) metadata.MD {
		for n := size - 7; n > 0; n-- {
			md := metadata.MD{"t": strings.Repeat("x", n)}
			if wire.HeaderBlockSize(md) == size {
				require.Len(t, wire.AppendHeaderBlock(nil, md), size)
				return md
			}
		}
		t.Fatalf("no trailer block of %d bytes", size)
		return nil
	}
	cases := []struct {
		name    string
		final   string
		trailer metadata.MD
		err     string      // the stream's end: "" a final
		got     metadata.MD // the trailer the client gets
	}{{
		name:    "trailer alone past the limit",
		final:   "ok",
		trailer: trailerOf(2 * replyLimit),
		err:     fmt.Sprintf("hatrpc: stream trailer of %d bytes exceeds the message limit of %d bytes", 2*replyLimit, replyLimit),
	}, {
		name:    "trailer and final one byte past the limit",
		final:   half,
		trailer: trailerOf(replyLimit - halfSize + 1),
		err: fmt.Sprintf("hatrpc: reply of %d bytes with a trailer of %d bytes exceeds the message limit of %d bytes",
			halfSize, replyLimit-halfSize+1, replyLimit),
		got: trailerOf(replyLimit - halfSize + 1),
	}, {
		name:    "trailer leaving no room for the refusal",
		final:   strings.Repeat("f", 64),
		trailer: trailerOf(replyLimit - 16),
		err: fmt.Sprintf("hatrpc: reply of %d bytes with a trailer of %d bytes exceeds the message limit of %d bytes",
			finalSize(strings.Repeat("f", 64)), replyLimit-16, replyLimit),
	}, {
		name:    "trailer and final filling the limit exactly",
		final:   "ok",
		trailer: trailerOf(replyLimit - okSize),
		got:     trailerOf(replyLimit - okSize),
	}}
	for _, rc := range tcpAndLane {
		for _, tc := range cases {
			t.Run(rc.name+"/"+tc.name, func(t *testing.T) {
				ts := rc.serve(t, server.WithLimits(replyLimits))
				ts.srv.Register(&server.Service{Name: "Trail", Methods: []server.Method{{
					Name: name, Stream: stream.Server,
					NewArgs: func() proto.Struct { return new(wiretest.EchoArgs) },
					HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
						// The request first: a stream its handler ended
						// before the client's SendMsg makes that return
						// io.EOF (gRPC-Go's rule), which the test would
						// take for a failure.
						if err := ss.RecvMsg(new(wiretest.EchoArgs)); err != nil {
							return nil, err
						}
						ss.SetTrailer(tc.trailer)
						if err := ss.SendMsg(shapeMsg("i64-list", 10)); err != nil {
							return nil, err
						}
						return &wiretest.EchoResult{Success: &tc.final}, nil
					},
				}}})
				c := dial(t, ts.addr, client.WithLimits(replyLimits))
				ctx := countCtx(t)
				var final wiretest.EchoResult
				st, err := c.NewStream(ctx, &client.Method{Service: "Trail", Name: name, Stream: stream.Server}, &final)
				require.NoError(t, err)
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{}))
				require.NoError(t, st.CloseSend())
				var res scalarResult
				require.NoError(t, st.RecvMsg(&res))
				require.Equal(t, 10, res.n)
				err = st.RecvMsg(&res)
				if tc.err == "" {
					require.Equal(t, io.EOF, err)
					require.Equal(t, tc.final, *final.Success)
				} else {
					var ae *proto.ApplicationException
					require.ErrorAs(t, err, &ae)
					require.Equal(t, proto.ExcInternalError, ae.Type)
					require.Equal(t, tc.err, ae.Message)
					require.Nil(t, final.Success)
				}
				require.Equal(t, tc.got, st.Trailer())
				refused := 0.0
				if tc.err != "" {
					refused = 1
				}
				require.Equal(t, refused, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}))
				require.Zero(t, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "stream_message_too_large"}))
				// The connection goes on.
				var out wiretest.EchoResult
				require.NoError(t, c.Call(ctx, methodWith(hints.Set{}), &wiretest.EchoArgs{Msg: "after"}, &out))
				require.Equal(t, "after", *out.Success)
				lane, _ := c.StreamRoutes()
				require.Equal(t, rc.lanes, lane == 1, "the stream's route")
			})
		}
	}
}
