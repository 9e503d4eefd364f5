//go:build cgo && linux

package client_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A message limit below the protocol's minimum (wire.MinMessageSize) is
// refused when the server starts serving and when the client dials, with
// the error saying so: below it the hello, the refusals and the stream
// control frames may not fit (under about 100 bytes Dial failed with "not
// a Thrift server", and under 64 KiB no lane could be made). At the
// minimum and above, on TCP and on a lane, a call and a stream whose reply
// is past the limit get the refusal naming it, whole, counted once each,
// and a reply within the limit goes by the route.
func TestMessageLimitFloor(t *testing.T) {
	limits := func(n int) proto.Limits {
		return proto.Limits{MaxMessageSize: n, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 16}
	}
	for _, n := range []int{0, 64, wire.MinMessageSize - 1} {
		t.Run(fmt.Sprint("below/", n), func(t *testing.T) {
			text := fmt.Sprintf("a message limit of %d bytes is below the protocol's minimum of 4096 bytes (the hello, refusals and stream control frames must fit)", n)
			s := server.New(server.WithLogger(quiet), server.WithLimits(limits(n)))
			ln, err := server.Listen("127.0.0.1:0")
			require.NoError(t, err)
			err = s.Serve(ln)
			require.ErrorIs(t, err, server.ErrBadOption)
			require.ErrorIs(t, err, wire.ErrMessageLimit)
			require.EqualError(t, err, "server: bad option: WithLimits: "+text)
			ts := serve(t, "")
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard(5*time.Second))
			defer cancel()
			_, err = client.Dial(ctx, ts.addr, client.WithLimits(limits(n)))
			require.ErrorIs(t, err, client.ErrMessageLimit)
			require.EqualError(t, err, "client: WithLimits: "+text)
		})
	}
	for _, n := range []int{wire.MinMessageSize, 2 * wire.MinMessageSize} {
		for _, rc := range tcpAndLane {
			t.Run(fmt.Sprint(n, "/", rc.name), func(t *testing.T) {
				lim := limits(n)
				ts := rc.serve(t, server.WithLimits(lim))
				ts.srv.Register(overLimitService())
				ts.srv.Register(finalService())
				c := dial(t, ts.addr, client.WithLimits(lim))
				unary := &client.Method{Service: "Over", Name: "over", Hints: &hints.Function{Name: "over"}}
				big := n + 1
				for i, kind := range []string{"result", "declared", "application"} {
					var res wiretest.EchoResult
					err := c.Call(tctx(t), unary, &wiretest.EchoArgs{Msg: kind, DelayNs: int64(big)}, &res)
					var ae *proto.ApplicationException
					require.ErrorAs(t, err, &ae, kind)
					require.Equal(t, proto.ExcInternalError, ae.Type)
					require.Contains(t, refusalTexts(overLimitResult(kind, big), n, "over", "Over:over"), ae.Message, kind)
					require.Equal(t, float64(i+1), serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}), kind)
				}
				var res wiretest.EchoResult
				require.NoError(t, c.Call(tctx(t), unary, &wiretest.EchoArgs{Msg: "result", DelayNs: int64(n / 2)}, &res))
				require.Equal(t, strings.Repeat("r", n/2), *res.Success)

				final := &client.Method{Service: "Final", Name: "final", Stream: stream.Server}
				finalOf := func(size int) (*wiretest.EchoResult, error) {
					var res wiretest.EchoResult
					st, err := c.NewStream(tctx(t), final, &res)
					require.NoError(t, err)
					require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: "result", DelayNs: int64(size)}))
					require.NoError(t, st.CloseSend())
					return &res, st.RecvMsg(&wiretest.EchoArgs{})
				}
				_, err := finalOf(big)
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				require.Contains(t, refusalTexts(overLimitResult("result", big), n, "final"), ae.Message)
				require.Equal(t, 4.0, serverCounter(t, ts, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}))
				fin, err := finalOf(n / 2)
				require.Equal(t, io.EOF, err)
				require.Equal(t, strings.Repeat("r", n/2), *fin.Success)

				lane, tcp := c.StreamRoutes()
				calls := serverCounter(t, ts, "hatrpc_server_calls_total", map[string]string{"function": "over", "transport": "tcp"})
				if rc.lanes {
					require.Equal(t, [3]float64{2, 0, 0}, [3]float64{float64(lane), float64(tcp), calls}, "streams on a lane, on TCP; calls on TCP")
					require.Equal(t, fastpathtest.Transport(), c.Plan("Over:over").Transport.String())
				} else {
					require.Equal(t, [3]float64{0, 0, 4}, [3]float64{float64(lane), float64(tcp), calls}, "streams on a lane, on TCP for want of a lane (a stream planned on TCP counts on neither); calls on TCP")
				}
			})
		}
	}
}

// refusalTexts is the text of the exception a reply of body past limit
// gets, for each way its size may be counted (the method's names, binary
// or compact).
func refusalTexts(body proto.Struct, limit int, names ...string) []string {
	var texts []string
	for _, size := range messageSizes(proto.Reply, body, names...) {
		texts = append(texts, fmt.Sprintf("hatrpc: reply of %d bytes exceeds the message limit of %d bytes", size, limit))
	}
	if exc, ok := body.(*proto.ApplicationException); ok {
		for _, size := range messageSizes(proto.Exception, exc, names...) {
			texts = append(texts, fmt.Sprintf("hatrpc: reply of %d bytes exceeds the message limit of %d bytes", size, limit))
		}
	}
	return texts
}

// finalService answers a server stream final(Msg: kind, DelayNs: n) with
// the final overLimitResult(kind, n).
func finalService() *server.Service {
	return &server.Service{Name: "Final", Methods: []server.Method{{Name: "final", Stream: stream.Server,
		HandleStream: func(_ context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			return overLimitResult(a.Msg, int(a.DelayNs)), nil
		}}}}
}

// A method whose name nearly fills the limit leaves its refusal less room
// than the text: the call still gets it, its text cut to fit, not a frame
// its client would take for a broken connection. (Such a function gets no
// lane: its attach, which names it too, is larger than its refusal.)
func TestRefusalCutToFitLimit(t *testing.T) {
	const n = wire.MinMessageSize
	lim := proto.Limits{MaxMessageSize: n, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 16}
	ts := serve(t, "", server.WithLimits(lim))
	for _, size := range []int{3900, 4010, 4020} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			name := strings.Repeat("m", size)
			svc := overLimitService()
			svc.Name = fmt.Sprint("Long", size)
			svc.Methods[0].Name = name
			ts.srv.Register(svc)
			c := dial(t, ts.addr, client.WithLimits(lim))
			m := &client.Method{Service: svc.Name, Name: name}
			body := overLimitResult("result", n)
			text := fmt.Sprintf("hatrpc: reply of %d bytes exceeds the message limit of %d bytes", messageSizes(proto.Reply, body, name)[0], n)
			whole := messageSizes(proto.Exception, proto.NewApplicationException(proto.ExcInternalError, text), name)[0]
			want := text[:len(text)-max(whole-n, 0)]
			t.Logf("name of %d bytes: refusal of %d bytes whole, text %q", size, whole, want)
			var res wiretest.EchoResult
			err := c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "result", DelayNs: n}, &res)
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, proto.ExcInternalError, ae.Type)
			require.Equal(t, want, ae.Message)
			require.NoError(t, c.Call(tctx(t), m, &wiretest.EchoArgs{Msg: "result", DelayNs: 10}, &res), "the connection goes on")
			require.Equal(t, "rrrrrrrrrr", *res.Success)
		})
	}
}
