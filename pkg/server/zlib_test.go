package server_test

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// zlibOf compresses b as one TZlibTransport flush.
func zlibOf(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	zw, err := zlib.NewWriterLevel(&out, zlib.BestCompression)
	require.NoError(t, err)
	_, _ = zw.Write(b)
	require.NoError(t, zw.Flush())
	return out.Bytes()
}

// A zlib bomb (a few KiB inflating to 8 MiB: a frame of 64 MiB, a string over the limit) gets the
// connection closed, with nothing buffered beyond the message limit, and
// the server goes on serving; so does a stream that does not inflate.
func TestZlibBombClosed(t *testing.T) {
	_, _, addr := start(t, server.WithLimits(proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 10}))
	huge := bytes.Repeat([]byte{0}, 8<<20)
	for name, in := range map[string][]byte{
		"framed":   zlibOf(t, append([]byte{0x03, 0xff, 0xff, 0xff}, huge...)),
		"unframed": zlibOf(t, append([]byte{0x80, 1, 0, 1, 0, 0, 0, 4, 'e', 'c', 'h', 'o', 0, 0, 0, 1, byte(proto.STRING), 0, 1, 0x03, 0xff, 0xff, 0xff}, huge...)),
		"corrupt":  append([]byte{0x78, 0x9c}, bytes.Repeat([]byte{0xff}, 256)...),
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.DialTimeout("tcp", addr, testenv.HangGuard(5*time.Second))
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testenv.HangGuard(time.Minute))))
			_, _ = nc.Write(in)
			// Returns once the server closed: at the end of the stream,
			// or with a reset when the close found input unread.
			_, err = io.Copy(io.Discard, nc)
			if err != nil {
				require.ErrorIs(t, err, syscall.ECONNRESET, "closed by the server, not timed out")
			}
		})
	}
	c := dial(t, addr, client.WithZlib())
	got, err := echo(tctx(t), c, &wiretest.EchoArgs{Msg: "still serving"})
	require.NoError(t, err)
	require.Equal(t, "still serving", got)
}

// zlibSeeds add TZlibTransport streams to FuzzServe: unframed and framed
// binary calls inside, on the socket and in frames.
func zlibSeeds(f *testing.F) {
	c := wire.GetCodec()
	defer wire.PutCodec(c)
	msg, _ := c.AppendMessage(nil, proto.Binary, "echo", proto.Call, 1, &wiretest.EchoArgs{Msg: "hi"})
	framedMsg := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	for _, inner := range [][]byte{msg, framedMsg} {
		z := zlibOf(f, inner)
		f.Add(z)
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(z))), z...))
	}
}
