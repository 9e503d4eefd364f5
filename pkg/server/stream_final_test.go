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

// A stream's final message (the handler's result) past the message limit
// is refused before it is built, as a unary reply, on TCP and on a lane
// (the provider's: shm, or ibv in the VM suite): a 32 MiB final against a
// 1 MiB limit costs the server about the limit (it built the whole
// message before), the stream ends with the exception naming the final's
// exact size, and the connection's next stream gets its final.
func TestStreamFinalNotBuiltPastLimit(t *testing.T) {
	const limit, boundFactor = 1 << 20, 8
	big := strings.Repeat("f", 32<<20)
	var sizes []int
	codec := wire.GetCodec()
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		b, encErr := codec.AppendMessage(nil, p, "final", proto.Reply, 1, &wiretest.EchoResult{Success: &big})
		require.NoError(t, encErr)
		sizes = append(sizes, len(b))
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
					for {
						var a wiretest.EchoArgs
						if err := ss.RecvMsg(&a); err == io.EOF {
							return &wiretest.EchoResult{Success: &res}, nil
						} else if err != nil {
							return nil, err
						}
						if a.Mode == 1 {
							res = big
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

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = finalOf(1)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("final of %d bytes, limit %d: %d bytes allocated", sizes[0], limit, alloc)
			require.Less(t, alloc, uint64(boundFactor*limit))
			var ae *proto.ApplicationException
			require.ErrorAs(t, err, &ae)
			require.Equal(t, proto.ExcInternalError, ae.Type)
			got := regexp.MustCompile(`^hatrpc: reply of ([0-9]+) bytes exceeds the message limit of ` +
				fmt.Sprint(limit) + ` bytes$`).FindStringSubmatch(ae.Message)
			require.NotNil(t, got, ae.Message)
			n, _ := strconv.Atoi(got[1])
			require.Contains(t, sizes, n, "the final's exact size")

			res, err = finalOf(0)
			require.Equal(t, io.EOF, err)
			require.Equal(t, "ok", *res.Success)
			lane, tcp := c.StreamRoutes()
			require.Zero(t, tcp, "no stream found the lanes busy")
			if rc.opts != nil {
				require.Equal(t, uint64(3), lane, "streams on a lane")
			} else {
				require.Zero(t, lane, "streams on a lane")
			}
		})
	}
}
