//go:build cgo && linux

package server_test

import (
	"io"
	"strconv"
	"testing"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/client/clientmetrics"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// On a lane (the plan puts server streams there) the client's c_hint
// stream_window bounds the server as on TCP: the open names it, and the
// client polls only while the server may send by that window.
func TestStreamWindowHintClientOnLane(t *testing.T) {
	for _, tt := range streamWindowCases {
		t.Run(tt.name, func(t *testing.T) {
			s, _, addr := laneStreams(t)
			c := dial(t, addr)
			checkServerBounded(t, s, c, hintedCount(tt.window), tt.sent)
			lane, tcp := c.StreamRoutes()
			require.Equal(t, uint64(1), lane)
			require.Zero(t, tcp)
		})
	}
}

// clientmetrics counts a lane stream's message bytes as the server does:
// exactly, each way.
func TestStreamBytesMetricsOnLane(t *testing.T) {
	s, _, addr := laneStreams(t)
	reg := prometheus.NewRegistry()
	m := clientmetrics.New(reg)
	c := dial(t, addr, client.WithStreamInterceptors(m.StreamInterceptor()))
	const n, blob = 5, 10 << 10
	req := &wiretest.EchoArgs{Mode: n, Blob: make([]byte, blob)}
	st, err := c.NewStream(tctx(t), sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(req))
	require.NoError(t, st.CloseSend())
	var in float64
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	for i := range n {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		b, err := codec.AppendStruct(nil, proto.Binary, &a)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(i), a.Msg)
		in += float64(len(b))
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	lane, _ := c.StreamRoutes()
	require.Equal(t, uint64(1), lane)
	b, err := codec.AppendStruct(nil, proto.Binary, req)
	require.NoError(t, err)
	out := float64(len(b))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	fn := func(dir string) map[string]string { return map[string]string{"function": "count", "direction": dir} }
	require.Equal(t, out, metricValue(mfs, "hatrpc_client_stream_message_bytes_total", fn("out")))
	require.Equal(t, in, metricValue(mfs, "hatrpc_client_stream_message_bytes_total", fn("in")))
	require.Equal(t, out, serverMetric(t, s, "hatrpc_server_stream_message_bytes_total", fn("in")))
	require.Equal(t, in, serverMetric(t, s, "hatrpc_server_stream_message_bytes_total", fn("out")))
}
