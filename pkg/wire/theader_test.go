package wire

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

// theaderFrame builds a THeader frame (after the length) carrying msg.
func theaderFrame(h THeaderInfo, msg []byte, zlibbed bool) []byte {
	b := AppendTHeaderHead(nil, &h, zlibbed)
	off := len(b)
	b = append(b, msg...)
	if zlibbed {
		b = CompressTHeader(b, off)
	}
	return b
}

func TestTHeaderRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		h    THeaderInfo
		zlib bool
	}{
		{"binary", THeaderInfo{Seqid: 7, Proto: proto.Binary}, false},
		{"compact-headers", THeaderInfo{Flags: 1, Seqid: -3, Proto: proto.Compact, Info: metadata.MD{"a": "1", "": "empty key", "k": ""}}, false},
		{"zlib", THeaderInfo{Seqid: 1 << 30, Proto: proto.Binary, Info: metadata.MD{"x-request-id": "abc"}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := bytes.Repeat([]byte("payload "), 40)
			b := theaderFrame(tc.h, msg, tc.zlib)
			require.True(t, IsTHeader(b))
			require.Zero(t, binary.BigEndian.Uint16(b[8:])*4%4)
			got, payload, err := ParseTHeader(b, 1<<20)
			require.NoError(t, err)
			require.Equal(t, msg, payload)
			want := tc.h
			want.Zlib = tc.zlib
			require.Equal(t, want, got)
		})
	}
}

func TestTHeaderErrors(t *testing.T) {
	good := theaderFrame(THeaderInfo{Seqid: 5}, []byte("m"), false)
	bomb := theaderFrame(THeaderInfo{Seqid: 6}, make([]byte, 1<<20), true)
	cases := []struct {
		name string
		in   []byte
		max  int
		want error
		msg  string
	}{
		{"short", good[:9], 100, ErrTHeader, "wire: bad THeader: proto: invalid data: 9 bytes, shorter than its fixed part"},
		{"magic", append([]byte{0x0f, 0xfe}, good[2:]...), 100, ErrTHeader, "wire: bad THeader: proto: invalid data: magic 0ffe"},
		{"header words beyond frame", append(append([]byte{}, good[:8]...), 0xff, 0xff), 100, ErrTHeader,
			"wire: bad THeader: proto: invalid data: header of 262140 bytes in a frame of 10"},
		{"protocol id", func() []byte { b := bytes.Clone(good); b[10] = 1; return b }(), 100, ErrTHeader,
			"wire: bad THeader: proto: invalid data: protocol id 1"},
		{"transform hmac", func() []byte { b := bytes.Clone(good); b[11], b[12] = 1, 2; return b }(), 100, ErrTHeaderTransform,
			"wire: unsupported THeader transform 2 (only zlib, 1, is)"},
		{"transform count", func() []byte { b := bytes.Clone(good); b[11] = 0x7f; return b }(), 100, ErrTHeader,
			"wire: bad THeader: proto: invalid data: 127 transforms in 2 bytes"},
		{"zlib bomb", bomb, 1 << 16, proto.ErrSizeLimit,
			"wire: frame too large: proto: size limit exceeded: inflated THeader payload over 65536 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseTHeader(tc.in, tc.max)
			require.ErrorIs(t, err, tc.want)
			require.EqualError(t, err, tc.msg)
		})
	}
}

func TestHeaderBlock(t *testing.T) {
	md := metadata.MD{"traceparent": "00-abc", "k": "v"}
	b := AppendHeaderBlock([]byte("pre"), md)
	got, n, err := ParseHeaderBlock(b[3:])
	require.NoError(t, err)
	require.Equal(t, len(b)-3, n)
	require.Equal(t, md, got)
	b = AppendHeaderBlockExtra(nil, md, metadata.RequestIDKey, "id1")
	got, _, err = ParseHeaderBlock(b)
	require.NoError(t, err)
	require.Equal(t, metadata.MD{"traceparent": "00-abc", "k": "v", metadata.RequestIDKey: "id1"}, got)

	b = AppendHeaderBlockRID(nil, md)
	got, _, err = ParseHeaderBlock(b)
	require.NoError(t, err)
	require.Regexp(t, "^[0-9a-f]{16}$", got[metadata.RequestIDKey])
	delete(got, metadata.RequestIDKey)
	require.Equal(t, md, got)

	for _, bad := range [][]byte{{0, 0}, {0, 0, 0, 9, 1}, {0, 0, 0, 2, 0x7f, 0}, {0, 0, 0, 3, 1, 5, 'a'}} {
		_, _, err := ParseHeaderBlock(bad)
		require.ErrorIs(t, err, proto.ErrInvalidData, "%x", bad)
	}
}

// HeaderBlockSize counts what AppendHeaderBlock would write, to the byte,
// across the lengths where a varint grows.
func TestHeaderBlockSize(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, md := range []metadata.MD{
		nil,
		{},
		{"k": "v"},
		{"": ""},
		{long(127): long(128), "a": long(16383)},
		{long(16384): "", "b": long(1 << 21)},
	} {
		require.Equal(t, len(AppendHeaderBlock(nil, md)), HeaderBlockSize(md), "%d pairs", len(md))
	}
}

// A frame with a THeader magic is told apart from plain framed Thrift and
// from garbage.
func TestDetectTHeader(t *testing.T) {
	fr := theaderFrame(THeaderInfo{}, []byte{0x80, 1, 0, 1}, false)
	in := binary.BigEndian.AppendUint32(nil, uint32(len(fr)))
	f, err := Detect(bufioOf(append(in, fr...)))
	require.NoError(t, err)
	require.Equal(t, Format{Proto: proto.Binary, Framed: true, Header: true}, f)
	require.Equal(t, "theader", f.String())
	_, err = Detect(bufioOf([]byte{0, 0, 0, 9, 0x0f, 0xfe}))
	require.ErrorIs(t, err, ErrGarbage)

	// Inside Apache's TFramedTransport: one more length, four more.
	outer := binary.BigEndian.AppendUint32(nil, uint32(len(in)+len(fr)))
	stream := append(append(outer, in...), fr...)
	f, err = Detect(bufioOf(stream))
	require.NoError(t, err)
	require.Equal(t, Format{Proto: proto.Binary, Framed: true, Header: true, Outer: true}, f)
	require.Equal(t, "framed-theader", f.String())
	msg, err := ReadMessage(bufioOf(stream), f, nil, nil)
	require.NoError(t, err)
	require.Equal(t, fr, msg, "both lengths taken off")
	for _, bad := range [][]byte{
		{0, 0, 0, 12, 0, 0, 0, 9, 0x0f, 0xff},  // lengths disagree
		{0, 0, 0, 14, 0, 0, 0, 10, 0x80, 0x01}, // no THeader magic inside
		// Lengths that cannot hold a THeader frame are garbage from the
		// first eight bytes: nothing waits for a magic (test/fault's
		// eight zeros).
		{0, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 10, 0, 0, 0, 6},
	} {
		_, err = Detect(bufioOf(bad))
		require.ErrorIs(t, err, ErrGarbage, "%x", bad)
	}
	// Detected right, then a later frame whose lengths disagree.
	bad := append(append([]byte(nil), stream...), 0, 0, 0, 6, 0, 0, 0, 9, 0x0f, 0xff)
	br := bufioOf(bad)
	_, err = ReadMessage(br, f, nil, nil)
	require.NoError(t, err)
	_, err = ReadMessage(br, f, nil, nil)
	require.ErrorIs(t, err, ErrTHeader)

	// Frames as both sides write them.
	b := make([]byte, PlainFrameHead(f), 20)
	b = append(b, 0x0f, 0xff, 1, 2)
	SealPlainFrame(f, b, 3)
	require.Equal(t, []byte{0, 0, 0, 11, 0, 0, 0, 7, 0x0f, 0xff, 1, 2}, b)
	require.Equal(t, 4, PlainFrameHead(Format{Framed: true, Header: true}))
	require.Equal(t, 0, PlainFrameHead(Format{}))
}

func FuzzParseTHeader(f *testing.F) {
	f.Add(theaderFrame(THeaderInfo{Seqid: 3, Info: metadata.MD{"a": "b"}}, []byte{0x80, 1, 0, 1}, false))
	f.Add(theaderFrame(THeaderInfo{Proto: proto.Compact}, []byte("xyz"), true))
	f.Add([]byte{0x0f, 0xff, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 16
		h, payload, err := ParseTHeader(in, max)
		if err != nil {
			if !errors.Is(err, proto.ErrInvalidData) && !errors.Is(err, proto.ErrSizeLimit) && !errors.Is(err, ErrTHeaderTransform) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(payload) > max || !h.Zlib && len(payload) > len(in) {
			t.Fatalf("payload of %d bytes from %d", len(payload), len(in))
		}
		// What was accepted encodes back to something that reads the same.
		again, p2, err := ParseTHeader(theaderFrame(h, payload, h.Zlib), max)
		if err != nil || !bytes.Equal(p2, payload) || again.Seqid != h.Seqid || again.Flags != h.Flags || again.Proto != h.Proto || len(again.Info) != len(h.Info) {
			t.Fatalf("round trip: %+v %v", again, err)
		}
	})
}

func FuzzParseHeaderBlock(f *testing.F) {
	f.Add(AppendHeaderBlock(nil, metadata.MD{"k": "v", "traceparent": "00-x"}))
	f.Add([]byte{0, 0, 0, 1, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		md, n, err := ParseHeaderBlock(in)
		if err != nil {
			if !errors.Is(err, proto.ErrInvalidData) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if n > len(in) || len(md) > len(in) {
			t.Fatalf("block of %d, %d headers from %d bytes", n, len(md), len(in))
		}
		md2, _, err := ParseHeaderBlock(AppendHeaderBlock(nil, md))
		if err != nil || len(md2) != len(md) {
			t.Fatalf("round trip %v %v", md2, err)
		}
	})
}

// Ensure the test's zlib matches what Apache writes (RFC 1950 framing).
func TestCompressIsZlib(t *testing.T) {
	b := CompressTHeader([]byte("hd"), 2)
	zr, err := zlib.NewReader(bytes.NewReader(b[2:]))
	require.NoError(t, err)
	require.NoError(t, zr.Close())
}

func bufioOf(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// Inflation asks the budget for what it makes, not for the frame's size,
// once, before allocating it.
func TestTHeaderInflateCharged(t *testing.T) {
	msg := make([]byte, 1<<20)
	fr := theaderFrame(THeaderInfo{Seqid: 2}, msg, true)
	require.Less(t, len(fr), 4<<10, "a small frame")
	cases := []struct {
		name    string
		allow   int // bytes the budget admits
		charged int
		err     bool
	}{
		{"admitted", 1 << 20, 1<<20 - ChargeMin, false},
		{"refused", 256 << 10, 0, true}, // asked once, for all of it
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			charged := 0
			refused := errors.New("budget full")
			_, got, err := ParseTHeaderCharged(fr, 4<<20, func(n int) error {
				if charged+n > tc.allow {
					return refused
				}
				charged += n
				return nil
			})
			require.Equal(t, tc.charged, charged)
			if tc.err {
				require.ErrorIs(t, err, refused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, msg, got)
		})
	}
}

// kvList encodes a count-prefixed list of n pairs of the key k and an
// empty value, the way a sender may pad a header list.
func kvList(n int, k string) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	for range n {
		b = appendStr(b, k)
		b = appendStr(b, "")
	}
	return b
}

// theaderWithInfo is a THeader frame whose info section is the given
// lists, each of type key/value, then a one-byte message.
func theaderWithInfo(lists ...[]byte) []byte {
	var info []byte
	info = binary.AppendUvarint(info, theaderBinary)
	info = binary.AppendUvarint(info, 0) // no transforms
	for _, l := range lists {
		info = binary.AppendUvarint(info, infoKeyValue)
		info = append(info, l...)
	}
	for len(info)%4 != 0 {
		info = append(info, 0)
	}
	b := []byte{0x0f, 0xff, 0, 0, 0, 0, 0, 1, 0, 0}
	binary.BigEndian.PutUint16(b[8:], uint16(len(info)/4))
	return append(append(b, info...), 'm')
}

// The number of header pairs is bounded apart from the frame's size: a
// frame of empty pairs (two bytes each on the wire) must not become a map
// sized by the sender's count.
func TestHeaderCountBounded(t *testing.T) {
	cases := []struct {
		name  string
		lists [][]byte
		msg   string // "" = accepted
		keys  int
	}{
		{"at the bound", [][]byte{kvList(MaxHeaders, "")}, "", 1},
		{"one list over", [][]byte{kvList(MaxHeaders+1, "")}, "wire: bad THeader: proto: invalid data: 1025 headers, more than the 1024 one message may carry", 0},
		{"the attack's count", [][]byte{kvList(32000, "")}, "wire: bad THeader: proto: invalid data: 32000 headers, more than the 1024 one message may carry", 0},
		{"two lists over together", [][]byte{kvList(600, "a"), kvList(600, "b")}, "wire: bad THeader: proto: invalid data: 1200 headers, more than the 1024 one message may carry", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _, err := ParseTHeaderHead(theaderWithInfo(tc.lists...))
			if tc.msg == "" {
				require.NoError(t, err)
				require.Len(t, h.Info, tc.keys)
				return
			}
			require.ErrorIs(t, err, proto.ErrInvalidData)
			require.EqualError(t, err, tc.msg)
		})
	}
	t.Run("header block", func(t *testing.T) {
		blk := kvList(MaxHeaders+1, "k")
		b := binary.BigEndian.AppendUint32(nil, uint32(len(blk)))
		_, _, err := ParseHeaderBlock(append(b, blk...))
		require.EqualError(t, err, "wire: bad THeader: proto: invalid data: 1025 headers, more than the 1024 one message may carry")
	})
}

// TestHeaderBlockAmplification: a header block of 32 MiB of empty pairs
// (the issue-43 probe's D4 input) is refused by its count without
// building a map for it: what it allocates does not grow with the block.
func TestHeaderBlockAmplification(t *testing.T) {
	blk := kvList(16<<20, "") // 2 bytes a pair: 32 MiB
	b := binary.BigEndian.AppendUint32(nil, uint32(len(blk)))
	b = append(b, blk...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ParseHeaderBlock(b)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, proto.ErrInvalidData)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "allocated for a refused block")
}
