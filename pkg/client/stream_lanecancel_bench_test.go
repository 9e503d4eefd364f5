//go:build cgo && linux

package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/test/fastpathtest"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// BenchmarkLaneStreamCancel: a stream on lanes opened, one message each
// way, then canceled; the next op opens the next stream. Before the
// cancel handshake each op set up its lanes anew (the canceled stream's
// were closed); with it, they are reused.
func BenchmarkLaneStreamCancel(b *testing.B) {
	ts := serve(b, "", server.WithRDMA(fastpathtest.Provider()))
	handler := func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
		var a wiretest.EchoArgs
		if err := ss.RecvMsg(&a); err != nil {
			return nil, err
		}
		if err := ss.SendMsg(&a); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ts.srv.Register(&server.Service{Name: "B", Methods: []server.Method{
		{Name: "down", Stream: stream.Server, HandleStream: handler},
		{Name: "both", Stream: stream.Bidi, HandleStream: handler},
	}})
	for _, m := range []*client.Method{{Service: "B", Name: "down", Stream: stream.Server}, {Service: "B", Name: "both", Stream: stream.Bidi}} {
		b.Run(m.Stream.String(), func(b *testing.B) {
			c := dial(b, ts.addr, client.WithMultiplexed())
			msg := &wiretest.EchoArgs{Msg: "x"}
			for range b.N {
				ctx, cancel := context.WithCancel(tctx(b))
				st, err := c.NewStream(ctx, m, &wiretest.EchoResult{})
				require.NoError(b, err)
				require.NoError(b, st.SendMsg(msg))
				var a wiretest.EchoArgs
				require.NoError(b, st.RecvMsg(&a))
				cancel()
				require.Error(b, st.RecvMsg(&a))
			}
		})
	}
}
