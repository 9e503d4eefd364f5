package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/pkg/wire"
	"github.com/hatrpc/hatrpc/test/wiretest"
)

// Hand-made frames from a client that breaks the stream rules: the
// offending stream is reset with a clear error, the connection and its
// other streams go on; a malformed frame closes the connection.

// rawStreams upgrades a raw connection offering streams.
func rawStreams(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	return rawStreamsWindow(t, addr, 2)
}

// rawStreams0 upgrades to a server with the default windows: a message
// count derived from the byte window.
func rawStreams0(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	return rawStreamsWindow(t, addr, streamcore.DefaultBytes/streamcore.MsgCost)
}

func rawStreamsWindow(t *testing.T, addr string, window int32) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(eventually)))
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	hello, err := codec.AppendMessage(nil, proto.Binary, wire.HelloMethod, proto.Call, 0,
		&wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapStreams})
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
	require.NotZero(t, rep.Caps&wire.CapStreams)
	require.Equal(t, window, rep.Windows.Messages)
	return nc, br
}

func openFrame(t testing.TB, id int32, name string) []byte {
	b, err := wiretest.Frame(proto.Binary, wire.KindStreamOpen, proto.Call, "S:"+name, id, 0, nil, &wiretest.Empty{})
	require.NoError(t, err)
	return b
}

func dataFrame(t testing.TB, id int32, msg string) []byte {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	b, err := codec.AppendStruct(make([]byte, wire.HeaderSize), proto.Binary, &wiretest.EchoArgs{Msg: msg})
	require.NoError(t, err)
	wire.SealFrame(b, wire.KindStreamData, 0, id, 0)
	return b
}

func endFrame(id int32) []byte {
	b := make([]byte, wire.HeaderSize)
	wire.SealFrame(b, wire.KindStreamEnd, 0, id, 0)
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestStreamRulesBroken(t *testing.T) {
	tests := []struct {
		name   string
		frames func(t *testing.T) []byte // on stream 1 (a "hold" stream) or others
		reset  int32                     // the stream reset
		text   string
	}{
		{"data past the window", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), dataFrame(t, 1, "1"), dataFrame(t, 1, "2"), dataFrame(t, 1, "3"))
		}, 1, "stream: data past the window: 2 messages, 18 bytes buffered of a window of 2 messages, 1048576 bytes (connection: 18 of 16777216 bytes)"},
		{"data after the end", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), endFrame(1), dataFrame(t, 1, "late"))
		}, 1, "stream: data after the end of the stream"},
		{"unknown stream", func(t *testing.T) []byte {
			return dataFrame(t, 99, "who")
		}, 99, "stream: data for an unknown stream"},
		{"credit never owed", func(t *testing.T) []byte {
			return cat(openFrame(t, 1, "hold"), wire.AppendWindowFrame(nil, 1, 5, 5))
		}, 1, "stream: window update beyond what was sent: 5 messages, 5 bytes with 0, 0 in flight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, sv, addr := startStreams(t, server.WithStreamWindow(2, 0, 0))
			nc, br := rawStreams(t, addr)
			// Stream 3, a client stream, runs beside the broken one.
			_, err := nc.Write(cat(tt.frames(t), openFrame(t, 3, "sum"), dataFrame(t, 3, "a"), dataFrame(t, 3, "b"), endFrame(3)))
			require.NoError(t, err)
			var reset, ended bool
			for !reset || !ended {
				h, f, err := wire.ReadFrame(br, nil, 1<<20)
				require.NoError(t, err)
				require.NoError(t, wire.CheckStreamHeader(&h))
				switch {
				case h.Kind == wire.KindStreamReset:
					require.Equal(t, tt.reset, h.Seqid)
					typ, text, err := wire.ParseReset(f[wire.HeaderSize:])
					require.NoError(t, err)
					require.Equal(t, int32(proto.ExcProtocolError), typ)
					require.Equal(t, tt.text, text)
					reset = true
				case h.Kind == wire.KindStreamEnd:
					require.Equal(t, int32(3), h.Seqid)
					_, msg, err := wire.StreamBody(&h, f[wire.HeaderSize:])
					require.NoError(t, err)
					mh, err := wire.ParseMsgHeader(proto.Binary, msg)
					require.NoError(t, err)
					require.Equal(t, proto.Reply, mh.Type)
					var res wiretest.EchoResult
					codec := wire.GetCodec()
					require.NoError(t, codec.Decode(proto.Binary, msg[mh.Body:], nil, &res))
					wire.PutCodec(codec)
					require.Equal(t, "ab", *res.Success)
					ended = true
				default:
					require.Equal(t, wire.KindStreamWindow, h.Kind)
				}
			}
			if tt.reset == 1 {
				select {
				case err := <-sv.ended:
					require.ErrorIs(t, err, context.Canceled)
				case <-time.After(eventually):
					t.Fatal("the reset stream's handler did not end")
				}
			}
		})
	}
}

func TestStreamMalformedFrameClosesConnection(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
	}{
		{"reset without its type", func() []byte {
			b := make([]byte, wire.HeaderSize+2)
			wire.SealFrame(b, wire.KindStreamReset, 0, 1, 0)
			return b
		}()},
		{"window of the wrong size", func() []byte {
			b := make([]byte, wire.HeaderSize+4)
			wire.SealFrame(b, wire.KindStreamWindow, 0, 1, 0)
			return b
		}()},
		{"timeout on data", func() []byte {
			b := make([]byte, wire.HeaderSize+1)
			wire.SealFrame(b, wire.KindStreamData, 0, 1, time.Second)
			return b
		}()},
		{"client end with a payload", func() []byte {
			b := make([]byte, wire.HeaderSize+1)
			wire.SealFrame(b, wire.KindStreamEnd, 0, 1, 0)
			return b
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, addr := startStreams(t)
			nc, br := rawStreams0(t, addr)
			_, err := nc.Write(tt.frame)
			require.NoError(t, err)
			_, err = io.ReadAll(br)
			require.NoError(t, err, "the server closes the connection")
		})
	}
}
