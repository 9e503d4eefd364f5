package streamcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// AppendMsg keeps a data message within the message limit, the frame's
// bytes before it (a header block) counting: a message that fits to the
// byte is appended whole, one a byte over or far past is refused with
// its exact size and leaves the frame as it was, its buffer about the
// limit however far past it the message goes (it grew to the message's
// size before), and a binary value left out as a ref counts.
func TestAppendMsgWithinLimit(t *testing.T) {
	const pre = 100 // bytes of a header block before the message
	small := &testMsg{s: strings.Repeat("s", 1000)}
	far := &testMsg{s: strings.Repeat("f", 4<<20)}
	withRef := &testMsg{s: "r", b: make([]byte, wire.RefMin)}
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		sizeOf := func(m *testMsg) int {
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			b, err := codec.AppendStruct(nil, p, m)
			require.NoError(t, err)
			return len(b)
		}
		cases := []struct {
			name  string
			pre   int
			msg   *testMsg
			limit int // the message's size plus limit, when positive
			fits  bool
			refs  int
		}{
			{"to-the-byte", 0, small, 0, true, 0},
			{"a-byte-over", 0, small, -1, false, 0},
			{"header-block-counts", pre, small, pre - 1, false, 0},
			{"header-block-fits", pre, small, pre, true, 0},
			{"header-block-alone-past", pre, small, pre/2 - sizeOf(small), false, 0},
			{"ref-to-the-byte", 0, withRef, 0, true, 1},
			{"ref-a-byte-over", 0, withRef, -1, false, 0},
			{"far-past", 0, far, -sizeOf(far) + 4<<10, false, 0},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprint(p, "/", tc.name), func(t *testing.T) {
				size := tc.pre + sizeOf(tc.msg)
				limit := sizeOf(tc.msg) + tc.limit
				b := make([]byte, wire.HeaderSize+tc.pre, 256)
				for i := range b {
					b[i] = byte(i)
				}
				codec := wire.GetCodec()
				defer wire.PutCodec(codec)
				out, refs, got, err := AppendMsg(codec, b, p, tc.msg, limit)
				require.Len(t, refs, tc.refs)
				if tc.fits {
					require.NoError(t, err)
					require.Equal(t, int64(size), got)
					require.Equal(t, b, out[:len(b)])
					require.Equal(t, size, len(out)+proto.RefsLen(refs)-wire.HeaderSize)
					return
				}
				require.Equal(t, &stream.TooLargeError{Size: size, Limit: limit}, err)
				require.Equal(t, int64(size), got)
				require.Equal(t, b, out, "the frame as it was")
				require.Less(t, cap(out), 2*max(limit, 256), "the buffer is about the limit")
			})
		}
	}
}

// testMsg is a struct of a string (1) and, when set, a binary (2).
type testMsg struct {
	s string
	b []byte
}

type testWriter interface {
	WriteStructBegin()
	WriteStructEnd()
	WriteFieldBegin(t proto.Type, id int16)
	WriteFieldStop()
	WriteString(v string)
	WriteBinary(v []byte)
}

func (m *testMsg) enc(w testWriter) error {
	w.WriteStructBegin()
	w.WriteFieldBegin(proto.STRING, 1)
	w.WriteString(m.s)
	if m.b != nil {
		w.WriteFieldBegin(proto.STRING, 2)
		w.WriteBinary(m.b)
	}
	w.WriteFieldStop()
	w.WriteStructEnd()
	return nil
}

func (m *testMsg) EncodeBinary(w *proto.BinaryWriter) error   { return m.enc(w) }
func (m *testMsg) EncodeCompact(w *proto.CompactWriter) error { return m.enc(w) }
func (m *testMsg) DecodeBinary(r *proto.BinaryReader) error   { return r.Skip(proto.STRUCT) }
func (m *testMsg) DecodeCompact(r *proto.CompactReader) error { return r.Skip(proto.STRUCT) }

// BenchmarkAppendMsg is what encoding within the limit costs a small
// message: AppendMsg against the codec's unlimited AppendStructRefs, the
// path SendMsg took before.
func BenchmarkAppendMsg(b *testing.B) {
	msg := &testMsg{s: strings.Repeat("m", 64)}
	for _, p := range []proto.Protocol{proto.Binary, proto.Compact} {
		buf := make([]byte, wire.HeaderSize, 4096)
		b.Run(fmt.Sprint(p, "/unlimited"), func(b *testing.B) {
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			for b.Loop() {
				if _, _, err := codec.AppendStructRefs(buf, p, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprint(p, "/limit"), func(b *testing.B) {
			codec := wire.GetCodec()
			defer wire.PutCodec(codec)
			for b.Loop() {
				if _, _, _, err := AppendMsg(codec, buf, p, msg, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
