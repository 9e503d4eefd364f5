//go:build cgo && linux

package server_test

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// A stream's final message (the handler's result, or the exception it
// ends with: declared, or an application exception) past the message
// limit is refused before it is built, as a unary reply, on TCP and on a
// lane (the provider's: shm, or ibv in the VM suite): a 32 MiB final
// against a 1 MiB limit costs the server about the limit (it built the
// whole message before), the stream ends with the exception naming the
// final's exact size, each refusal is counted in
// hatrpc_server_rejected_total{reason="reply_too_large"} (an exception
// was not), and the connection's next stream gets its final.
func TestStreamFinalNotBuiltPastLimit(t *testing.T) {
	const limit, boundFactor = 1 << 20, 8
	big := strings.Repeat("f", 32<<20)
	// The handler's final by the mode of its last message: 0 a small
	// result; else 32 MiB as the result, the declared exception's text or
	// an application exception's message.
	kinds := []struct {
		name string
		mode int32
		typ  proto.MessageType
		body proto.Struct
	}{
		{"result", 1, proto.Reply, &wiretest.EchoResult{Success: &big}},
		{"declared", 2, proto.Reply, &wiretest.EchoResult{Err: &wiretest.EchoError{Code: 7, Why: big}}},
		{"application", 3, proto.Exception, proto.NewApplicationException(proto.ExcUnknown, big)},
	}
	sizes := map[int32][]int{}
	codec := wire.GetCodec()
	for _, kc := range kinds {
		for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
			b, encErr := codec.AppendMessage(nil, p, "final", kc.typ, 1, kc.body)
			require.NoError(t, encErr)
			sizes[kc.mode] = append(sizes[kc.mode], len(b))
		}
	}
	wire.PutCodec(codec)
	routes := []struct {
		name string
		opts []server.Option
	}{
		{"tcp", nil},
		{"lane", []server.Option{server.WithRDMA(fastpathtest.Provider())}},
	}
	for _, rc := range routes {
		t.Run(rc.name, func(t *testing.T) {
			lim := proto.DefaultLimits
			lim.MaxMessageSize, lim.MaxStringLength = limit, 64<<20
			s := server.New(append([]server.Option{server.WithLogger(quiet), server.WithLimits(lim)}, rc.opts...)...)
			s.Register(&server.Service{Name: "F", Methods: []server.Method{{Name: "final", Stream: stream.Client,
				HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
					res := "ok"
					var final proto.Struct = &wiretest.EchoResult{Success: &res}
					for {
						var a wiretest.EchoArgs
						if err := ss.RecvMsg(&a); err == io.EOF {
							if exc, ok := final.(*proto.ApplicationException); ok {
								return nil, exc
							}
							return final, nil
						} else if err != nil {
							return nil, err
						}
						for _, kc := range kinds {
							if kc.mode == a.Mode {
								final = kc.body
							}
						}
					}
				}}}})
			c := dial(t, serveOn(t, s))
			m := &client.Method{Service: "F", Name: "final", Stream: stream.Client}
			finalOf := func(mode int32) (*wiretest.EchoResult, error) {
				var res wiretest.EchoResult
				st, err := c.NewStream(tctx(t), m, &res)
				require.NoError(t, err)
				require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: mode}))
				require.NoError(t, st.CloseSend())
				return &res, st.RecvMsg(&wiretest.EchoArgs{})
			}
			res, err := finalOf(0) // warm the route up
			require.Equal(t, io.EOF, err)
			require.Equal(t, "ok", *res.Success)

			for i, kc := range kinds {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				_, err = finalOf(kc.mode)
				runtime.ReadMemStats(&after)
				alloc := after.TotalAlloc - before.TotalAlloc
				t.Logf("%s final of %d bytes, limit %d: %d bytes allocated", kc.name, sizes[kc.mode][0], limit, alloc)
				require.Less(t, alloc, uint64(boundFactor*limit), kc.name)
				var ae *proto.ApplicationException
				require.ErrorAs(t, err, &ae, kc.name)
				require.Equal(t, proto.ExcInternalError, ae.Type)
				got := regexp.MustCompile(`^hatrpc: reply of ([0-9]+) bytes exceeds the message limit of ` +
					fmt.Sprint(limit) + ` bytes$`).FindStringSubmatch(ae.Message)
				require.NotNil(t, got, "%s: %.200s", kc.name, ae.Message)
				n, _ := strconv.Atoi(got[1])
				require.Contains(t, sizes[kc.mode], n, "%s: the final's exact size", kc.name)
				mfs, gerr := s.Registry().Gather()
				require.NoError(t, gerr)
				require.Equal(t, float64(i+1), metricValue(mfs, "hatrpc_server_rejected_total", map[string]string{"reason": "reply_too_large"}), kc.name)
			}

			res, err = finalOf(0)
			require.Equal(t, io.EOF, err)
			require.Equal(t, "ok", *res.Success)
			lane, tcp := c.StreamRoutes()
			require.Zero(t, tcp, "no stream found the lanes busy")
			if rc.opts != nil {
				require.Equal(t, uint64(2+len(kinds)), lane, "streams on a lane")
			} else {
				require.Zero(t, lane, "streams on a lane")
			}
		})
	}
}
