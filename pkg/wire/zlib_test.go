package wire

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// zlibStream compresses msgs as TZlibTransport does, a flush after each;
// framed puts each flush in a 4-byte-length frame.
func zlibStream(t testing.TB, level int, framed bool, msgs ...[]byte) []byte {
	var out, chunk bytes.Buffer
	zw, err := zlib.NewWriterLevel(&chunk, level)
	require.NoError(t, err)
	for _, m := range msgs {
		_, _ = zw.Write(m)
		require.NoError(t, zw.Flush())
		if framed {
			out.Write(binary.BigEndian.AppendUint32(nil, uint32(chunk.Len())))
		}
		out.Write(chunk.Bytes())
		chunk.Reset()
	}
	return out.Bytes()
}

func TestDetectZlib(t *testing.T) {
	msg := []byte{0x80, 1, 0, 1, 0, 0, 0, 1, 'm', 0, 0, 0, 1, 0}
	for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, 3, zlib.DefaultCompression, zlib.BestCompression} {
		for _, framed := range []bool{false, true} {
			in := zlibStream(t, level, framed, msg, msg)
			z, fr, err := DetectZlib(bufioOf(in))
			require.NoError(t, err)
			require.True(t, z, "level %d framed %v: %x", level, framed, in[:6])
			require.Equal(t, framed, fr)
			r := bufio.NewReader(NewZlibReader(bufioOf(in), framed, 1<<20))
			f, err := Detect(r)
			require.NoError(t, err)
			require.Equal(t, Format{Proto: proto.Binary}, f)
			for range 2 {
				got, err := ReadMessage(r, f, nil, nil)
				require.NoError(t, err)
				require.Equal(t, msg, got)
			}
		}
	}
	for _, other := range [][]byte{
		msg, {0x82, 0x21}, {0, 0, 0, 9, 0x80, 1}, {0, 0, 0, 9, 0x0f, 0xff},
		{0x78, 0x9d},                     // check bits wrong
		{0x78, 0xbb},                     // preset dictionary
		{0, 0, 0, 0, 0x78, 0x9c},         // an empty frame
		[]byte("GET / HTTP/1.1\r\n\r\n"), // someone else's protocol
	} {
		z, _, err := DetectZlib(bufioOf(other))
		require.NoError(t, err)
		require.False(t, z, "%x", other)
	}
}

// A ZlibWriter's output is what TZlibTransport reads, framed or not.
func TestZlibWriterReader(t *testing.T) {
	for _, framed := range []bool{false, true} {
		var wire bytes.Buffer
		zw := NewZlibWriter(&wire, framed)
		for _, m := range []string{"one", "two", string(bytes.Repeat([]byte("x"), 100_000))} {
			n, err := zw.Write([]byte(m))
			require.NoError(t, err)
			require.Equal(t, len(m), n)
		}
		z, fr, err := DetectZlib(bufioOf(wire.Bytes()))
		require.NoError(t, err)
		require.True(t, z)
		require.Equal(t, framed, fr)
		got, err := io.ReadAll(NewZlibReader(bufioOf(wire.Bytes()), framed, 1<<20))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the stream is open: no final block")
		require.Equal(t, "onetwo"+string(bytes.Repeat([]byte("x"), 100_000)), string(got))
	}
}

// A few hundred bytes that inflate to a frame far over the limit, or an
// endless string, end with the limit's error after at most a message's
// memory; a stream that does not inflate is ErrZlib; a zlib frame over
// the limit is refused before it is read.
func TestZlibBomb(t *testing.T) {
	lim := &proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 16, MaxStringLength: 1 << 20, MaxContainerSize: 1 << 10}
	huge := bytes.Repeat([]byte{0}, 8<<20)
	framedBomb := append([]byte{0x03, 0xff, 0xff, 0xff}, huge...) // a 64 MiB frame of zeros
	unframedBomb := append([]byte{0x80, 1, 0, 1, 0, 0, 0, 1, 'm', 0, 0, 0, 1, byte(proto.STRING), 0, 1, 0x00, 0x0f, 0xff, 0xff}, huge...)
	for _, tc := range []struct {
		name string
		in   []byte
		f    Format
	}{
		{"framed", framedBomb, Format{Proto: proto.Binary, Framed: true}},
		{"unframed", unframedBomb, Format{Proto: proto.Binary}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := zlibStream(t, zlib.BestCompression, false, tc.in)
			require.Less(t, len(in), 128<<10, "a bomb: %d bytes", len(in))
			r := bufio.NewReader(NewZlibReader(bufioOf(in), false, lim.MaxMessageSize))
			msg, err := ReadMessage(r, tc.f, nil, lim)
			require.ErrorIs(t, err, proto.ErrSizeLimit)
			require.LessOrEqual(t, cap(msg), 2*lim.MaxMessageSize)
		})
	}
	bad := append([]byte{0x78, 0x9c}, bytes.Repeat([]byte{0xff}, 64)...)
	_, err := io.ReadAll(NewZlibReader(bufioOf(bad), false, 1<<20))
	require.ErrorIs(t, err, ErrZlib)
	require.ErrorIs(t, err, proto.ErrInvalidData)
	_, err = io.ReadAll(NewZlibReader(bufioOf([]byte{0x7f, 0, 0, 0, 0x78, 0x9c}), true, 1<<20))
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

// FuzzZlibStream feeds arbitrary bytes to the zlib reading path as the
// server reads a connection: detection, inflation (framed or not), the
// inner stack's detection and messages under small limits. It must
// never panic, and what it returns stays within the limits; every error
// is typed.
func FuzzZlibStream(f *testing.F) {
	msg := []byte{0x80, 1, 0, 1, 0, 0, 0, 1, 'm', 0, 0, 0, 1, 0}
	f.Add(zlibStream(f, zlib.BestCompression, false, msg, msg))
	f.Add(zlibStream(f, zlib.DefaultCompression, true, msg))
	f.Add(zlibStream(f, zlib.BestSpeed, false, append([]byte{0, 0, 0, 14}, msg...)))
	f.Add(zlibStream(f, zlib.NoCompression, true, []byte{0x82, 0x21, 1, 1, 'm', 0}))
	f.Add([]byte{0x78, 0x9c, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, 0x78, 0xda, 0, 0, 0, 0})
	lim := &proto.Limits{MaxMessageSize: 1 << 16, MaxDepth: 16, MaxStringLength: 1 << 12, MaxContainerSize: 1 << 10}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufioOf(in)
		z, framed, err := DetectZlib(br)
		if err != nil || !z {
			return
		}
		r := bufio.NewReader(NewZlibReader(br, framed, lim.MaxMessageSize))
		fm, err := Detect(r)
		if err != nil {
			return
		}
		for range 8 {
			msg, err := ReadMessage(r, fm, nil, lim)
			if err != nil {
				if !errors.Is(err, proto.ErrInvalidData) && !errors.Is(err, proto.ErrSizeLimit) &&
					!errors.Is(err, proto.ErrDepthLimit) && !errors.Is(err, proto.ErrBadType) &&
					!errors.Is(err, proto.ErrBadVersion) && !errors.Is(err, proto.ErrNegativeSize) &&
					!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if len(msg) > lim.MaxMessageSize {
				t.Fatalf("message of %d bytes over the limit", len(msg))
			}
		}
	})
}
