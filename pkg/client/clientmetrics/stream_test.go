package clientmetrics_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

func TestStreamMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	// count: Mode messages back; a negative Mode ends with the declared
	// exception after -Mode.
	srv.Register(&server.Service{Name: "S", Methods: []server.Method{{
		Name: "count", Stream: stream.Server,
		HandleStream: func(ctx context.Context, ss server.ServerStream) (proto.Struct, error) {
			var a wiretest.EchoArgs
			if err := ss.RecvMsg(&a); err != nil {
				return nil, err
			}
			if a.Msg != "" {
				// A frame of its own, not a message: neither side
				// counts it.
				if err := ss.SendHeader(metadata.Pairs("k", a.Msg)); err != nil {
					return nil, err
				}
			}
			for range max(a.Mode, -a.Mode) {
				if err := ss.SendMsg(&a); err != nil {
					return nil, err
				}
			}
			if a.Mode < 0 {
				return &wiretest.EchoResult{Err: &wiretest.EchoError{Why: "no"}}, nil
			}
			return nil, nil
		},
	}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, server.ErrServerClosed)
	}()

	reg := prometheus.NewRegistry()
	m := clientmetrics.New(reg)
	conn, err := client.Dial(ctx, ln.Addr().String(), client.WithStreamInterceptors(m.StreamInterceptor()))
	require.NoError(t, err)
	defer conn.Close()
	meth := &client.Method{Service: "S", Name: "count", Stream: stream.Server}
	run := func(mode int32) {
		st, err := conn.NewStream(ctx, meth, &wiretest.EchoResult{})
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: mode, Blob: make([]byte, 100*max(mode, -mode))}))
		require.NoError(t, st.CloseSend())
		for range max(mode, -mode) {
			require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
		}
		require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	}
	run(3)
	run(-2)
	canceled, stop := context.WithCancel(ctx)
	st, err := conn.NewStream(canceled, meth, &wiretest.EchoResult{})
	require.NoError(t, err)
	stop()
	require.ErrorIs(t, st.RecvMsg(&wiretest.EchoArgs{}), context.Canceled)

	fn := map[string]string{"service": "S", "function": "count"}
	assert.Equal(t, 3.0, value(t, reg, "hatrpc_client_streams_opened_total", fn))
	assert.Equal(t, 0.0, value(t, reg, "hatrpc_client_streams_open", fn))
	for outcome, n := range map[string]float64{"ok": 1, "EchoError": 1, "canceled": 1} {
		assert.Equal(t, n, value(t, reg, "hatrpc_client_streams_handled_total", map[string]string{"function": "count", "outcome": outcome}), outcome)
	}
	assert.Equal(t, 2.0, value(t, reg, "hatrpc_client_stream_messages_total", map[string]string{"function": "count", "direction": "out"}))
	assert.Equal(t, 5.0, value(t, reg, "hatrpc_client_stream_messages_total", map[string]string{"function": "count", "direction": "in"}))

	// Bytes: each message's encoding, the size the server counts too.
	size := func(a *wiretest.EchoArgs) float64 {
		c := wire.GetCodec()
		defer wire.PutCodec(c)
		b, err := c.AppendStruct(nil, proto.Binary, a)
		require.NoError(t, err)
		return float64(len(b))
	}
	three, two := size(&wiretest.EchoArgs{Mode: 3, Blob: make([]byte, 300)}), size(&wiretest.EchoArgs{Mode: -2, Blob: make([]byte, 200)})
	out, in := three+two, 3*three+2*two
	bytes := func(reg *prometheus.Registry, side, dir string) float64 {
		return value(t, reg, "hatrpc_"+side+"_stream_message_bytes_total", map[string]string{"service": "S", "function": "count", "direction": dir})
	}
	assert.Equal(t, out, bytes(reg, "client", "out"))
	assert.Equal(t, in, bytes(reg, "client", "in"))
	assert.Equal(t, out, bytes(srv.Registry(), "server", "in"))
	assert.Equal(t, in, bytes(srv.Registry(), "server", "out"))

	// Header metadata sent on its own (SendHeader) is no message.
	st, err = conn.NewStream(ctx, meth, &wiretest.EchoResult{})
	require.NoError(t, err)
	hello := &wiretest.EchoArgs{Mode: 1, Msg: "v"}
	require.NoError(t, st.SendMsg(hello))
	require.NoError(t, st.CloseSend())
	require.NoError(t, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	md, err := st.Header()
	require.NoError(t, err)
	require.Equal(t, "v", md["k"])
	assert.Equal(t, out+size(hello), bytes(reg, "client", "out"))
	assert.Equal(t, in+size(hello), bytes(reg, "client", "in"))
	assert.Equal(t, bytes(reg, "client", "out"), bytes(srv.Registry(), "server", "in"))
	assert.Equal(t, bytes(reg, "client", "in"), bytes(srv.Registry(), "server", "out"))
}
