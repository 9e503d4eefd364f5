package wire

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
)

func TestStreamFrames(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		err   string
	}{
		{"window", AppendWindowFrame(nil, 3, 4, 5), ""},
		{"connection window", AppendWindowFrame(nil, 0, 0, 5), ""},
		{"reset", AppendResetFrame(nil, 3, proto.ExcProtocolError, "why"), ""},
		{"window of a negative stream", AppendWindowFrame(nil, -1, 0, 5), "wire: bad frame: proto: invalid data: window frame for -1 with 8 payload bytes, flags 0x0"},
		{"reset of stream 0", AppendResetFrame(nil, 0, 1, ""), "wire: bad frame: proto: invalid data: stream frame of kind 12 for stream 0"},
		{"empty data", func() []byte { b := make([]byte, HeaderSize); SealFrame(b, KindStreamData, 0, 1, 0); return b }(),
			"wire: bad frame: proto: invalid data: empty stream frame of kind 9"},
		{"timeout on an end", func() []byte { b := make([]byte, HeaderSize); SealFrame(b, KindStreamEnd, 0, 1, 5); return b }(),
			"wire: bad frame: proto: invalid data: timeout on stream frame of kind 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := DecodeHeader(tt.frame, 1<<20)
			require.NoError(t, err)
			err = CheckStreamHeader(&h)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
		})
	}
	// FlagWindow: on an open only, and a window of at least one message
	// and one byte.
	data := append(make([]byte, HeaderSize), 1)
	SealFrame(data, KindStreamData, FlagWindow, 1, 0)
	_, err := DecodeHeader(data, 1<<20)
	require.EqualError(t, err, "wire: bad frame: proto: invalid data: reserved bits set")
	for _, tt := range []struct {
		payload []byte
		err     string
	}{
		{append(AppendOpenWindow(nil, 512, 64<<10), 'x'), ""},
		{AppendOpenWindow(nil, 0, 64<<10), "wire: bad frame: proto: invalid data: open with a window of 0 messages, 65536 bytes"},
		{AppendOpenWindow(nil, 1, 1<<31), "wire: bad frame: proto: invalid data: open with a window of 1 messages, 2147483648 bytes"},
		{[]byte{0, 0, 0, 1}, "wire: bad frame: proto: invalid data: open of 4 payload bytes with a window"},
	} {
		open := append(make([]byte, HeaderSize), tt.payload...)
		SealFrame(open, KindStreamOpen, FlagWindow, 1, 0)
		h, err := DecodeHeader(open, 1<<20)
		require.NoError(t, err)
		require.NoError(t, CheckStreamHeader(&h))
		msgs, n, rest, err := OpenWindow(&h, open[HeaderSize:])
		if tt.err != "" {
			require.EqualError(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, [2]uint32{512, 64 << 10}, [2]uint32{msgs, n})
		require.Equal(t, []byte("x"), rest)
	}

	msgs, n, err := ParseWindow(AppendWindowFrame(nil, 3, 4, 5)[HeaderSize:])
	require.NoError(t, err)
	require.Equal(t, [2]uint32{4, 5}, [2]uint32{msgs, n})
	typ, text, err := ParseReset(AppendResetFrame(nil, 3, 7, string(make([]byte, 2*MaxResetText)))[HeaderSize:])
	require.NoError(t, err)
	require.Equal(t, int32(7), typ)
	require.Len(t, text, MaxResetText)
}

// FuzzStreamFrame decodes arbitrary bytes as a stream frame the way both
// readers do: whatever the input, no panic, and what decodes re-encodes
// to the same bytes.
func FuzzStreamFrame(f *testing.F) {
	f.Add(AppendWindowFrame(nil, 1, 2, 3))
	f.Add(AppendResetFrame(nil, 1, proto.ExcProtocolError, "no"))
	data := AppendHeaderBlock(make([]byte, HeaderSize), metadata.Pairs("k", "v"))
	data = append(data, 0)
	SealFrame(data, KindStreamData, FlagHeaders, 1, 0)
	f.Add(data)
	end := make([]byte, HeaderSize)
	SealFrame(end, KindStreamEnd, 0, 1, 0)
	f.Add(end)
	open := AppendOpenWindow(make([]byte, HeaderSize), 512, 64<<10)
	open = AppendHeaderBlock(open, metadata.Pairs("k", "v"))
	open = append(open, 0)
	SealFrame(open, KindStreamOpen, FlagWindow|FlagHeaders, 1, 0)
	f.Add(open)
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := DecodeHeader(in, 1<<16)
		if err != nil || !IsStreamKind(h.Kind) || CheckStreamHeader(&h) != nil || len(in) < HeaderSize+h.PayloadLen() {
			return
		}
		p := in[HeaderSize : HeaderSize+h.PayloadLen()]
		switch h.Kind {
		case KindStreamWindow:
			msgs, n, err := ParseWindow(p)
			if err != nil {
				t.Fatalf("checked window frame does not parse: %v", err)
			}
			if out := AppendWindowFrame(nil, h.Seqid, msgs, n); !bytes.Equal(out, in[:len(out)]) {
				t.Fatalf("window %x re-encoded as %x", in, out)
			}
		case KindStreamReset:
			typ, text, err := ParseReset(p)
			if err != nil {
				t.Fatalf("checked reset frame does not parse: %v", err)
			}
			if out := AppendResetFrame(nil, h.Seqid, typ, text); !bytes.Equal(out, in[:len(out)]) {
				t.Fatalf("reset %x re-encoded as %x", in, out)
			}
		default:
			if h.Kind == KindStreamOpen {
				msgs, n, rest, err := OpenWindow(&h, p)
				if err != nil {
					return
				}
				if w := AppendOpenWindow(nil, msgs, n); h.Flags&FlagWindow != 0 && !bytes.Equal(w, p[:len(w)]) {
					t.Fatalf("open window %x re-encoded as %x", p[:len(w)], w)
				}
				p = rest
			}
			block, rest, err := StreamBody(&h, p)
			if err != nil {
				return
			}
			if len(block)+len(rest) > len(p) {
				t.Fatalf("body of %d+%d bytes from a %d-byte payload", len(block), len(rest), len(p))
			}
			if block != nil {
				_, _ = ParseKV(block)
			}
		}
	})
}
