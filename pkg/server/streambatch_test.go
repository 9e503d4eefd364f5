package server_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// frameConn counts the server's writes that carry stream data frames and
// the frames; after the first such write it holds the next one until
// open is closed, so what the stream sends meanwhile queues.
type frameConn struct {
	net.Conn
	open chan struct{}

	mu         sync.Mutex
	buf        []byte // bytes written, not yet a whole frame
	dataWrites int
	dataFrames int
	gated      bool
	helloDone  bool
}

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.dataWrites == 1 && !c.gated {
		c.gated = true
		c.mu.Unlock()
		<-c.open
		c.mu.Lock()
	}
	if !c.helloDone {
		// The hello's reply: an unframed Thrift message.
		c.helloDone = true
		c.mu.Unlock()
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	data := 0
	for len(c.buf) >= wire.HeaderSize {
		n := 4 + int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < n {
			break
		}
		if wire.Kind(c.buf[4]) == wire.KindStreamData {
			data++
		}
		c.buf = c.buf[n:]
	}
	if data > 0 {
		c.dataWrites++
		c.dataFrames += data
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

type frameListener struct {
	net.Listener
	open  chan struct{}
	mu    sync.Mutex
	conns []*frameConn
}

func (l *frameListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &frameConn{Conn: nc, open: l.open}
	l.mu.Lock()
	l.conns = append(l.conns, fc)
	l.mu.Unlock()
	return fc, nil
}

// A handler sending a stream's messages back to back has them batched:
// the connection's writer writes what queued behind its write in one go
// instead of one write per message.
func TestStreamSenderIsBatched(t *testing.T) {
	ctx := tctx(t)
	sv := newStreamSvc()
	s := server.New(server.WithLogger(quiet))
	s.Register(sv.service())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &frameListener{Listener: ln, open: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(fl) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		<-served
	})
	const n = 200
	// A window for every message, so the server needs no credit while
	// its writes are held.
	c := dial(t, ln.Addr().String(), client.WithStreamWindow(n+1, 1<<20, 16<<20))
	st, err := c.NewStream(ctx, sMethod("count", stream.Server), &wiretest.EchoResult{})
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Mode: n}))
	require.NoError(t, st.CloseSend())

	// The handler sends all n and returns while the second write is held.
	require.Eventually(t, func() bool {
		mfs, err := s.Registry().Gather()
		return err == nil && metricValue(mfs, "hatrpc_server_streams_opened_total", nil) == 1 &&
			metricValue(mfs, "hatrpc_server_streams_open", nil) == 0
	}, eventually, time.Millisecond)
	close(fl.open)
	for i := range n {
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
	}
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))

	fl.mu.Lock()
	require.Len(t, fl.conns, 1)
	fc := fl.conns[0]
	fl.mu.Unlock()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Equal(t, n, fc.dataFrames)
	// The first message written by the handler, the next by the writer's
	// goroutine (held; it may have found more queued when it ran), and
	// the rest in one round behind it: not one write per message. A
	// round is one writev on a socket, but net.Buffers.WriteTo calls a
	// conn that is not one (this) once per piece, and a round's data may
	// be in two: the pending buffer (where a frame goes while the reader
	// holds the writer, Writer.Hold) and a posted chunk. So the held
	// round and the one after it count up to 2 each here: 1 + 2 + 2 (5
	// was seen in the VM under stress-ng, where 3 was asserted before).
	require.GreaterOrEqual(t, fc.dataWrites, 2)
	require.LessOrEqual(t, fc.dataWrites, 5)
}

// Large stream messages are decoded in place on both sides (their
// values keep the frame's buffer, wire.Adopt): every value received must
// stay intact while later messages arrive into pooled buffers.
func TestStreamLargeMessagesDecodeInPlace(t *testing.T) {
	ctx := tctx(t)
	_, _, addr := startStreams(t)
	c := dial(t, addr)
	st, err := c.NewStream(ctx, sMethod("echo", stream.Bidi), &wiretest.EchoResult{})
	require.NoError(t, err)
	const n, size = 24, 64 << 10
	var got [][]byte
	for i := range n {
		blob := bytes.Repeat([]byte{byte(i + 1)}, size)
		require.NoError(t, st.SendMsg(&wiretest.EchoArgs{Msg: strconv.Itoa(i), Blob: blob}))
		var a wiretest.EchoArgs
		require.NoError(t, st.RecvMsg(&a))
		require.Equal(t, strconv.Itoa(i), a.Msg)
		got = append(got, a.Blob)
	}
	require.NoError(t, st.CloseSend())
	require.Equal(t, io.EOF, st.RecvMsg(&wiretest.EchoArgs{}))
	runtime.GC() // a buffer given back too early would be reused by now
	for i, b := range got {
		require.Equal(t, bytes.Repeat([]byte{byte(i + 1)}, size), b, "message %d", i)
	}
}
