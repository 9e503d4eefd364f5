//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A lane carries at most fastpath.MaxMessage bytes a message, so a
// stream's message within a message limit set above that (WithLimits)
// cannot go by a lane: on a lane the limit is the lower of the two, and
// a message past the lane's is refused as one past the message limit
// (*stream.TooLargeError naming the lane's limit), from either side, and
// the stream goes on. Before, SendMsg returned nil and the engine
// refused the frame: the stream failed with its lane ("rdma: closed" for
// the server's message, "rdma: invalid argument" for the client's).
func TestLaneStreamMsgPastLaneMax(t *testing.T) {
	limits := proto.Limits{MaxMessageSize: 96 << 20, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 16 << 20}
	laneMax := fastpath.MaxMessage - wire.HeaderSize
	items := laneMax/8 + 16 // i64s: past the lane's maximum, within the message limit
	for _, sender := range []string{"server", "client"} {
		t.Run(sender, func(t *testing.T) {
			ts := laneServer(t, server.WithLimits(limits))
			refused := make(chan error, 1)
			ts.srv.Register(shapeStreams(refused))
			c := dial(t, ts.addr, client.WithLimits(limits))
			m := &client.Method{Service: "Shapes", Name: "shapes", Stream: stream.Bidi}
			ctx := countCtx(t)
			st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
			require.NoError(t, err)
			require.Equal(t, 10, shapeRoundTrip(t, st, "i64-list", 10))
			if sender == "server" {
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "i64-list", DelayNs: int64(items), Mode: 1}))
				select {
				case err = <-refused:
				case <-ctx.Done():
					t.Fatal("the handler's SendMsg did not return")
				}
			} else {
				err = st.SendMsg(shapeMsg("i64-list", items))
			}
			var tl *stream.TooLargeError
			require.ErrorAs(t, err, &tl)
			require.ErrorIs(t, err, proto.ErrSizeLimit)
			require.Contains(t, shapeSizes("i64-list", items), tl.Size, "the message's exact size")
			require.Equal(t, laneMax, tl.Limit, "the lane's limit")
			refusals := 0.0
			if sender == "server" {
				refusals = 1
			}
			require.Equal(t, refusals, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "stream_message_too_large"}))
			require.Equal(t, 1000, shapeRoundTrip(t, st, "i64-list", 1000))
			require.NoError(t, st.CloseSend())
			require.Equal(t, io.EOF, st.RecvMsg(&scalarResult{}))
			lane, _ := c.StreamRoutes()
			require.Equal(t, uint64(1), lane)
		})
	}
}

// A server stream's final message is held to the lane's limit as its
// data messages are: a final past what the lane carries, within a
// message limit above it, ends the stream with the exception naming the
// lane's limit (reply_too_large), and the lane carries the next stream.
// Before, the final went to the engine, which refused it, and the stream
// failed with its lane.
func TestLaneStreamFinalPastLaneMax(t *testing.T) {
	limits := proto.Limits{MaxMessageSize: 96 << 20, MaxDepth: 16, MaxStringLength: 4 << 20, MaxContainerSize: 16 << 20}
	laneMax := fastpath.MaxMessage - wire.HeaderSize
	items := laneMax/8 + 16
	ts := laneServer(t, server.WithLimits(limits))
	ts.srv.Register(&server.Service{Name: "Final", Methods: []server.Method{{
		Name: "big", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			return shapeMsg(a.Msg, int(a.DelayNs)), nil
		},
	}}})
	c := dial(t, ts.addr, client.WithLimits(limits))
	m := &client.Method{Service: "Final", Name: "big", Stream: stream.Server}
	ctx := countCtx(t)
	finalOf := func(n int) (int, error) {
		var res scalarResult
		st, err := c.NewStream(ctx, m, &res)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "i64-list", DelayNs: int64(n)}))
		require.NoError(t, st.CloseSend())
		err = st.RecvMsg(&scalarResult{}) // the final is in res once it returns
		return res.n, err
	}
	n, err := finalOf(10)
	require.Equal(t, io.EOF, err)
	require.Equal(t, 10, n)

	_, err = finalOf(items)
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcInternalError, ae.Type)
	got := regexp.MustCompile(`^hatrpc: reply of ([0-9]+) bytes exceeds the message limit of ` +
		fmt.Sprint(laneMax) + ` bytes$`).FindStringSubmatch(ae.Message)
	require.NotNil(t, got, ae.Message)
	size, _ := strconv.Atoi(got[1])
	require.Contains(t, replySizes("i64-list", items), size, "the final's exact size")
	require.Equal(t, 1.0, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}))

	n, err = finalOf(1000)
	require.Equal(t, io.EOF, err)
	require.Equal(t, 1000, n)
	lane, tcp := c.StreamRoutes()
	require.Equal(t, [2]uint64{3, 0}, [2]uint64{lane, tcp}, "lane, tcp")
}
