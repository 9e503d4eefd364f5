package server_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// The stream_window hint (docs/design/streams.md, "Flow control"): a
// function's own per-stream receive window on each side, in place of the
// connection's.

// windowBlob is the blob of the messages these tests send: with its
// field headers and the message's number a frame payload a little over
// 4 KiB, so a window of k*4KiB bytes holds k of them (the last one
// overshooting it, as the rule allows).
const windowBlob = 4 << 10

// hintedCount is S:count with a c_hint stream_window of window bytes (0:
// none).
func hintedCount(window int) *client.Method {
	m := sMethod("count", stream.Server)
	if window > 0 {
		m.Hints = &hints.Function{Name: "count", Client: hints.Set{StreamWindow: window}, Stream: stream.Server}
	}
	return m
}

// startHintedStreams is startStreams with an s_hint stream_window of
// window bytes on S:hold.
func startHintedStreams(t *testing.T, window int, opts ...server.Option) (*server.Server, *streamSvc, string) {
	t.Helper()
	sv := newStreamSvc()
	s := server.New(append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	svc := sv.service()
	for i := range svc.Methods {
		if m := &svc.Methods[i]; m.Name == "hold" && window > 0 {
			m.Hints = &hints.Function{Name: "hold", Server: hints.Set{StreamWindow: window}, Stream: stream.Bidi}
		}
	}
	s.Register(svc)
	return s, sv, serveOn(t, s)
}

// streamWindowCases: the client's c_hint (a server stream) and the
// server's s_hint (a client's messages) alike.
var streamWindowCases = []struct {
	name   string
	window int
	sent   int // messages the sender sends before it blocks
}{
	{"16KiB: four messages", 16 << 10, 4},
	{"64KiB: sixteen messages", 64 << 10, 16},
	{"no hint: the connection's 1MiB holds all 40", 0, 40},
}

const windowTotal = 40

// A client's c_hint stream_window bounds what the server sends ahead of
// its reading, per stream, over TCP: a small window stops the handler
// after its bytes, a larger one lets more through.
func TestStreamWindowHintClient(t *testing.T) {
	for _, tt := range streamWindowCases {
		t.Run(tt.name, func(t *testing.T) {
			s, _, addr := startStreams(t)
			checkServerBounded(t, s, dial(t, addr), hintedCount(tt.window), tt.sent)
		})
	}
}

// checkServerBounded opens m (S:count) on c, asks for windowTotal
// messages, reads none until the server has sent want of them and no
// more, then reads them all.
func checkServerBounded(t *testing.T, s *server.Server, c *client.Conn, m *client.Method, want int) {
	t.Helper()
	st, err := c.NewStream(tctx(t), m, &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: windowTotal, Blob: make([]byte, windowBlob)}))
	require.NoError(t, st.CloseSend())
	sent := func() float64 {
		mfs, err := s.Registry().Gather()
		require.NoError(t, err)
		return metricValue(mfs, "hatrpc_server_stream_messages_total", map[string]string{"function": "count", "direction": "out"})
	}
	require.Eventually(t, func() bool { return sent() == float64(want) }, eventually, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
	require.Equal(t, float64(want), sent())
	for i := range windowTotal {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
		require.Len(t, a.Blob, windowBlob)
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	require.Equal(t, float64(windowTotal), sent())
}

// A server's s_hint stream_window bounds what a client sends ahead of
// the handler's reading: the client's SendMsg blocks after the window's
// bytes, and the server holds no more than the window and one message.
func TestStreamWindowHintServer(t *testing.T) {
	for _, tt := range streamWindowCases {
		t.Run(tt.name, func(t *testing.T) {
			s, sv, addr := startHintedStreams(t, tt.window)
			st, err := dial(t, addr).NewStream(tctx(t), sMethod("hold", stream.Bidi), &wiretest.EchoResult{})
			require.NoError(t, err)
			var sent atomic.Int64
			done := make(chan error, 1)
			go func() {
				for i := range windowTotal {
					if err := st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: make([]byte, windowBlob)}); err != nil {
						done <- err
						return
					}
					sent.Add(1)
				}
				done <- st.CloseSend()
			}()
			require.Eventually(t, func() bool { return sent.Load() == int64(tt.sent) }, eventually, time.Millisecond)
			time.Sleep(100 * time.Millisecond) // room for a violation to show, never for a false failure
			require.Equal(t, int64(tt.sent), sent.Load())
			if tt.window > 0 {
				_, buffered := server.StreamState(s)
				require.Less(t, buffered, int64(tt.window+windowBlob+64))
			}
			close(sv.release)
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(eventually):
				t.Fatal("sender stuck")
			}
			select {
			case err := <-sv.ended:
				require.Equal(t, io.EOF, err)
			case <-time.After(eventually):
				t.Fatal("handler stuck")
			}
			require.Equal(t, int64(windowTotal), sv.seen.Load())
			require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
		})
	}
}

// rawHelloCaps upgrades a raw connection offering caps and returns the reply.
func rawHelloCaps(t *testing.T, addr string, caps uint64) (net.Conn, *bufio.Reader, *wire.HelloReply) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(eventually)))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	hello, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0, &wire.Hello{Version: wire.Version, Caps: caps})
	require.NoError(t, err)
	_, err = nc.Write(hello)
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	msg, err := wire.ReadMessage(br, wire.Format{Proto: proto.Binary}, nil, nil)
	require.NoError(t, err)
	mh, err := wire.ParseMsgHeader(proto.Binary, msg)
	require.NoError(t, err)
	var rep wire.HelloReply
	require.NoError(t, codec.Decode(proto.Binary, msg[mh.Body:], nil, &rep))
	return nc, br, &rep
}

// The hello reply lists the server's own windows, by both names an open
// may use, to a client offering wire.CapStreamWindows; a client without
// it (an older HatRPC) gets neither, and the stream's window is the
// hello's: its messages past the hinted window are taken, not reset.
func TestStreamWindowHello(t *testing.T) {
	s, _, addr := startHintedStreams(t, 16<<10)
	_, _, rep := rawHelloCaps(t, addr, wire.CapFraming|wire.CapStreams|wire.CapStreamWindows)
	require.NotZero(t, rep.Caps&wire.CapStreamWindows)
	require.Equal(t, []wire.FnWindow{{Function: "S:hold", Messages: 128, Bytes: 16 << 10}, {Function: "hold", Messages: 128, Bytes: 16 << 10}}, rep.FnWindows)

	nc, _, rep := rawHelloCaps(t, addr, wire.CapFraming|wire.CapStreams)
	require.Zero(t, rep.Caps&wire.CapStreamWindows)
	require.Empty(t, rep.FnWindows)
	_, err := nc.Write(openFrame(t, 1, "hold"))
	require.NoError(t, err)
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	const n = 8 // 32 KiB: twice the hinted window
	var size int64
	for range n {
		b, err := codec.AppendStruct(make([]byte, wire.HeaderSize), proto.Binary, &wiretest.EchoArgs{Blob: make([]byte, windowBlob)})
		require.NoError(t, err)
		wire.SealFrame(b, wire.KindStreamData, 0, 1, 0)
		size += int64(len(b) - wire.HeaderSize)
		_, err = nc.Write(b)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { _, b := server.StreamState(s); return b == size }, eventually, time.Millisecond)
	streams, _ := server.StreamState(s)
	require.Equal(t, 1, streams, "the stream was not reset")
}
