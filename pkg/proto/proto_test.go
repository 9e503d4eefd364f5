package proto_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

func decodeWith(p proto.Protocol, data []byte, lim *proto.Limits, s proto.Struct) error {
	return proto.Unmarshal(p, data, lim, s)
}

// nest returns a binary or compact struct nested depth levels deep through
// field 1.
func nest(p proto.Protocol, depth int) []byte {
	var b []byte
	for range depth {
		if p == proto.Binary {
			b = append(b, byte(proto.STRUCT), 0, 1)
		} else {
			b = append(b, 0x1c)
		}
	}
	for range depth + 1 {
		b = append(b, 0)
	}
	return b
}

func TestDecodeErrors(t *testing.T) {
	small := &proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 8, MaxStringLength: 16, MaxContainerSize: 100}
	cases := []struct {
		name string
		p    proto.Protocol
		in   []byte
		lim  *proto.Limits
		want error
	}{
		{"bin empty", proto.Binary, nil, nil, proto.ErrTruncated},
		{"bin bad field type", proto.Binary, []byte{1, 0, 1}, nil, proto.ErrBadType},
		{"bin truncated field header", proto.Binary, []byte{8, 0}, nil, proto.ErrTruncated},
		{"bin truncated i32", proto.Binary, []byte{8, 0, 4, 0, 0}, nil, proto.ErrTruncated},
		{"bin negative string", proto.Binary, []byte{11, 0, 7, 0xff, 0xff, 0xff, 0xff}, nil, proto.ErrNegativeSize},
		{"bin string over limit", proto.Binary, []byte{11, 0, 7, 0, 0, 0, 17}, small, proto.ErrSizeLimit},
		{"bin string past end", proto.Binary, []byte{11, 0, 7, 0, 0, 0, 5, 'a'}, nil, proto.ErrTruncated},
		{"bin huge list", proto.Binary, []byte{15, 0, 10, 8, 0x7f, 0xff, 0xff, 0xff}, nil, proto.ErrSizeLimit},
		{"bin list count vs bytes", proto.Binary, []byte{15, 0, 10, 10, 0, 0, 1, 0, 0, 0, 0}, nil, proto.ErrTruncated},
		{"bin negative list", proto.Binary, []byte{15, 0, 10, 8, 0xff, 0xff, 0xff, 0xfe}, nil, proto.ErrNegativeSize},
		{"bin list bad elem", proto.Binary, []byte{15, 0, 10, 1, 0, 0, 0, 1, 0}, nil, proto.ErrBadType},
		{"bin map bad key", proto.Binary, []byte{13, 0, 12, 99, 8, 0, 0, 0, 1, 0, 0}, nil, proto.ErrBadType},
		{"bin map over limit", proto.Binary, []byte{13, 0, 12, 3, 3, 0, 0, 0, 101, 0}, small, proto.ErrSizeLimit},
		{"bin depth", proto.Binary, nest(proto.Binary, 9), small, proto.ErrDepthLimit},
		{"cmp empty", proto.Compact, nil, nil, proto.ErrTruncated},
		{"cmp bad type nibble", proto.Compact, []byte{0x1e}, nil, proto.ErrBadType},
		{"cmp varint overflow", proto.Compact, []byte{0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, nil, proto.ErrInvalidVarint},
		{"cmp truncated varint", proto.Compact, []byte{0x15, 0xff}, nil, proto.ErrTruncated},
		{"cmp negative string", proto.Compact, []byte{0x78, 0xff, 0xff, 0xff, 0xff, 0x0f}, nil, proto.ErrNegativeSize},
		{"cmp string over limit", proto.Compact, []byte{0x78, 17}, small, proto.ErrSizeLimit},
		{"cmp huge list", proto.Compact, []byte{0xa9, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x07}, nil, proto.ErrSizeLimit},
		{"cmp list count vs bytes", proto.Compact, []byte{0xa9, 0xf7, 0x80, 0x01, 0, 0}, nil, proto.ErrTruncated},
		{"cmp map count vs bytes", proto.Compact, []byte{0xcb, 0x80, 0x01, 0x55, 0}, nil, proto.ErrTruncated},
		{"cmp map bad types", proto.Compact, []byte{0xcb, 0x01, 0xe5, 0}, nil, proto.ErrBadType},
		{"cmp truncated double", proto.Compact, []byte{0x67, 0, 0, 0}, nil, proto.ErrTruncated},
		{"cmp depth", proto.Compact, nest(proto.Compact, 9), small, proto.ErrDepthLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []proto.Struct{&AllTypes{}, &Generic{}} {
				err := decodeWith(tc.p, tc.in, tc.lim, s)
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.want)
				assert.ErrorIs(t, err, proto.ErrInvalidData)
				var de *proto.DecodeError
				assert.ErrorAs(t, err, &de)
			}
		})
	}
}

func TestNestingWithinLimit(t *testing.T) {
	lim := &proto.Limits{MaxMessageSize: 1 << 20, MaxDepth: 8, MaxStringLength: 16, MaxContainerSize: 100}
	for _, p := range protocols {
		var g Generic
		require.NoError(t, decodeWith(p, nest(p, 7), lim, &g))
		require.Equal(t, 1, g.Fields)
	}
}

func TestMessageHeaderErrors(t *testing.T) {
	cases := []struct {
		name string
		p    proto.Protocol
		in   []byte
		want error
	}{
		{"bin bad version", proto.Binary, []byte{0x80, 0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, proto.ErrBadVersion},
		{"bin truncated", proto.Binary, []byte{0x80, 0x01, 0, 1, 0, 0}, proto.ErrTruncated},
		{"bin nonstrict truncated name", proto.Binary, []byte{0, 0, 0, 5, 'a', 'b'}, proto.ErrTruncated},
		{"cmp bad id", proto.Compact, []byte{0x83, 0x21, 0, 0}, proto.ErrBadVersion},
		{"cmp bad version", proto.Compact, []byte{0x82, 0x22, 0, 0}, proto.ErrBadVersion},
		{"cmp truncated", proto.Compact, []byte{0x82}, proto.ErrTruncated},
		{"cmp name negative", proto.Compact, []byte{0x82, 0x21, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, proto.ErrNegativeSize},
		{"bad protocol", 0, []byte{0x82, 0x21, 0, 0}, proto.ErrBadProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := proto.DecodeMessageHeader(tc.p, tc.in, nil)
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, proto.ErrInvalidData)
		})
	}
}

func TestAlias(t *testing.T) {
	for _, p := range protocols {
		for _, alias := range []bool{false, true} {
			want := randAll(rand.New(rand.NewPCG(3, 3)))
			want.Bin = []byte("hello world")
			msg, err := proto.EncodeMessage(p, nil, "f", proto.Call, 1, want)
			require.NoError(t, err)
			d := proto.NewDecoder(nil)
			d.Alias = alias
			h, err := d.Begin(p, msg)
			require.NoError(t, err)
			require.Equal(t, "f", h.Name)
			var got AllTypes
			require.NoError(t, d.ReadBody(&got))
			require.Equal(t, len(msg), d.Pos())
			require.Equal(t, want.Bin, got.Bin)
			i := bytes.Index(msg, []byte("hello world"))
			msg[i] = 'J'
			if alias {
				require.Equal(t, "Jello world", string(got.Bin), "%v aliases input", p)
			} else {
				require.Equal(t, "hello world", string(got.Bin), "%v copies", p)
			}
		}
	}
}

func TestUnsafeStrings(t *testing.T) {
	for _, p := range protocols {
		for _, unsafe := range []bool{false, true} {
			want := &Nested{A: 1, S: "hello world", Flags: []bool{true}}
			msg, err := proto.EncodeMessage(p, nil, "f", proto.Call, 1, &wrapper{N: *want})
			require.NoError(t, err)
			d := proto.NewDecoder(nil)
			d.UnsafeStrings = unsafe
			_, err = d.Begin(p, msg)
			require.NoError(t, err)
			var got wrapper
			require.NoError(t, d.ReadBody(&got))
			require.Equal(t, *want, got.N)
			msg[bytes.Index(msg, []byte("hello"))] = 'J'
			if unsafe {
				require.Equal(t, "Jello world", got.N.S, "%v shares input memory", p)
			} else {
				require.Equal(t, "hello world", got.N.S, "%v copies", p)
			}
		}
	}
}

func TestDecoderSkipBody(t *testing.T) {
	for _, p := range protocols {
		msg, err := proto.EncodeMessage(p, nil, "f", proto.Call, 1, randAll(rand.New(rand.NewPCG(5, 5))))
		require.NoError(t, err)
		d := proto.NewDecoder(nil)
		_, err = d.Begin(p, msg)
		require.NoError(t, err)
		require.NoError(t, d.SkipBody())
		require.Equal(t, len(msg), d.Pos())
	}
}

func TestBadProtocol(t *testing.T) {
	_, err := proto.Marshal(0, nil, &Generic{})
	require.ErrorIs(t, err, proto.ErrBadProtocol)
	require.ErrorIs(t, proto.Unmarshal(9, []byte{0}, nil, &Generic{}), proto.ErrBadProtocol)
	_, err = proto.EncodeMessage(7, nil, "x", proto.Call, 0, &Generic{})
	require.ErrorIs(t, err, proto.ErrBadProtocol)
	_, err = proto.NewDecoder(nil).Begin(0, []byte{0})
	require.ErrorIs(t, err, proto.ErrBadProtocol)
}

func TestRequiredFieldError(t *testing.T) {
	err := proto.RequiredFieldError("Point", "x")
	require.ErrorIs(t, err, proto.ErrRequiredField)
	require.ErrorIs(t, err, proto.ErrInvalidData)
	var rf *proto.RequiredFieldErr
	require.ErrorAs(t, err, &rf)
	require.Equal(t, "Point", rf.Struct)
	require.Equal(t, "x", rf.Field)
	require.Contains(t, err.Error(), "Point.x")
}

func TestApplicationExceptionError(t *testing.T) {
	var err error = proto.NewApplicationException(proto.ExcUnknownMethod, "no frob")
	var ae *proto.ApplicationException
	require.ErrorAs(t, err, &ae)
	require.Equal(t, proto.ExcUnknownMethod, ae.Type)
	require.ErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcUnknownMethod})
	require.NotErrorIs(t, err, &proto.ApplicationException{Type: proto.ExcInternalError})
	require.Contains(t, err.Error(), "no frob")
	require.Contains(t, (&proto.ApplicationException{Type: proto.ExcInternalError}).Error(), "unknown internal error")
}

func TestTypeStrings(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{proto.UUID.String(), "UUID"}, {proto.Type(99).String(), "Type(99)"},
		{proto.Oneway.String(), "ONEWAY"}, {proto.MessageType(9).String(), "MessageType(9)"},
		{proto.Compact.String(), "compact"}, {proto.Protocol(0).String(), "Protocol(0)"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.got)
	}
}

// chunkReader returns at most n bytes per Read, so messages arrive split.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(b []byte) (int, error) {
	if len(b) > c.n {
		b = b[:c.n]
	}
	return c.r.Read(b)
}

func TestEncoderZeroAlloc(t *testing.T) {
	s := newMixed()
	for _, p := range protocols {
		var enc proto.Encoder
		buf := make([]byte, 0, 4096)
		allocs := testing.AllocsPerRun(100, func() {
			out, err := enc.Encode(p, buf[:0], "mixed", proto.Call, 1, s)
			if err != nil || len(out) == 0 {
				panic("encode failed")
			}
		})
		require.Zero(t, allocs, p.String())
	}
}

// TestDecoderReusesName checks names stay right across different methods
// and that a repeated method name costs no allocation.
func TestDecoderReusesName(t *testing.T) {
	for _, p := range protocols {
		d := proto.NewDecoder(nil)
		var s Mixed
		for _, name := range []string{"a", "a", "bb", "a", ""} {
			msg, err := proto.EncodeMessage(p, nil, name, proto.Call, 1, newMixed())
			require.NoError(t, err)
			h, err := d.Begin(p, msg)
			require.NoError(t, err)
			require.Equal(t, name, h.Name)
			require.NoError(t, d.ReadBody(&s))
		}
		msg, err := proto.EncodeMessage(p, nil, "mixed", proto.Call, 1, newMixed())
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := d.Begin(p, msg); err != nil {
				panic(err)
			}
			if err := d.ReadBody(&s); err != nil {
				panic(err)
			}
		})
		require.Zero(t, allocs, p.String())
		require.Equal(t, *newMixed(), s)
	}
}

func TestDecoderMessageSizeLimit(t *testing.T) {
	lim := &proto.Limits{MaxMessageSize: 16, MaxDepth: 8, MaxStringLength: 16, MaxContainerSize: 16}
	for _, p := range protocols {
		msg, err := proto.EncodeMessage(p, nil, "mixed", proto.Call, 1, newMixed())
		require.NoError(t, err)
		_, err = proto.NewDecoder(lim).Begin(p, msg)
		require.ErrorIs(t, err, proto.ErrSizeLimit)
	}
}

func TestFramedEncodeRoundTrip(t *testing.T) {
	for _, p := range protocols {
		var enc proto.Encoder
		want := newMixed()
		frame, err := enc.EncodeFramed(p, []byte("prefix"), "mixed", proto.Call, 77, want)
		require.NoError(t, err)
		require.Equal(t, "prefix", string(frame[:6]))
		require.Equal(t, uint32(len(frame)-10), binary.BigEndian.Uint32(frame[6:10]), "frame length")
		msg := frame[10:]
		var got Mixed
		h, err := proto.DecodeMessage(p, msg, nil, &got)
		require.NoError(t, err)
		require.Equal(t, int32(77), h.SeqID)
		require.Equal(t, *want, got)
	}
}

func TestWriterErrorsPropagate(t *testing.T) {
	boom := errors.New("boom")
	for _, p := range protocols {
		_, err := proto.EncodeMessage(p, nil, "x", proto.Call, 0, failing{boom})
		require.ErrorIs(t, err, boom)
		_, err = new(proto.Encoder).EncodeFramed(p, nil, "x", proto.Call, 0, failing{boom})
		require.ErrorIs(t, err, boom)
		_, err = proto.Marshal(p, nil, failing{boom})
		require.ErrorIs(t, err, boom)
	}
}

type failing struct{ err error }

func (f failing) EncodeBinary(*proto.BinaryWriter) error   { return f.err }
func (f failing) EncodeCompact(*proto.CompactWriter) error { return f.err }
func (f failing) DecodeBinary(*proto.BinaryReader) error   { return f.err }
func (f failing) DecodeCompact(*proto.CompactReader) error { return f.err }
