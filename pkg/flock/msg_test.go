package flock

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    header
		es   []entry
	}{
		{"empty control", header{flags: flagCtl, canary: 7, ack: 1, credit: 64, ctl: 3<<32 | ctlInactive}, nil},
		{"one", header{canary: 9, ack: 640}, []entry{{caller: 1, seq: 2, handler: 3, data: []byte("hello")}}},
		{"many unaligned", header{canary: 1}, []entry{
			{caller: 1, seq: 1, data: []byte{1}}, {caller: 2, seq: 5, status: statusHandlerErr, data: make([]byte, 13)},
			{caller: 3, seq: 9, data: nil}, {caller: 4, seq: 1 << 31, handler: 65535, data: make([]byte, 64)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeMessage(tc.h, tc.es)
			require.Len(t, b, messageLen(tc.es))
			require.Zero(t, len(b)%8)
			h, es, err := decodeMessage(b, nil)
			require.NoError(t, err)
			require.Equal(t, uint32(len(b)), h.total)
			require.Equal(t, uint16(len(tc.es)), h.count)
			h.total, h.count = 0, 0
			require.Equal(t, tc.h, h)
			require.Len(t, es, len(tc.es))
			for i := range es {
				want := tc.es[i]
				if want.data == nil {
					want.data = []byte{}
				}
				require.Equal(t, want, es[i])
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encodeMessage(header{canary: 5}, []entry{{caller: 1, data: []byte("abc")}})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	le := binary.LittleEndian
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:10], ErrBadMessage},
		{"bad trailer canary", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrTornMessage},
		{"bad header canary", mut(func(b []byte) []byte { b[8] ^= 1; return b }), ErrTornMessage},
		{"version", mut(func(b []byte) []byte { b[7] = 9; return b }), ErrBadMessage},
		{"length beyond buffer", mut(func(b []byte) []byte { le.PutUint32(b, uint32(len(b)+8)); return b }), ErrBadMessage},
		{"unaligned length", mut(func(b []byte) []byte { le.PutUint32(b, uint32(len(b)-3)); return b }), ErrBadMessage},
		{"count too large", mut(func(b []byte) []byte { le.PutUint16(b[4:], 2); return b }), ErrBadMessage},
		{"entry size overflow", mut(func(b []byte) []byte { le.PutUint32(b[headerLen:], 1<<31); return b }), ErrBadMessage},
		{"trailing bytes", mut(func(b []byte) []byte { le.PutUint16(b[4:], 0); return b }), ErrBadMessage},
		{"unknown flag", mut(func(b []byte) []byte { b[6] = 0x80; return b }), ErrBadMessage},
		{"nonzero padding", mut(func(b []byte) []byte { b[headerLen+metaLen+3] = 1; return b }), ErrBadMessage},
		{"entries in control", mut(func(b []byte) []byte { b[6] = flagCtl; return b }), ErrBadMessage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeMessage(tc.b, nil)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// FuzzDecodeMessage: the decoder never panics or reads out of bounds, and
// whatever it accepts re-encodes to the same bytes (so an accepted message
// is exactly what a sender could have written).
func FuzzDecodeMessage(f *testing.F) {
	f.Add(encodeMessage(header{canary: 1}, nil))
	f.Add(encodeMessage(header{canary: 2, ack: 64}, []entry{{caller: 1, seq: 1, handler: 2, data: []byte("x")}}))
	f.Add(encodeMessage(header{flags: flagCtl, canary: 3, credit: 32}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, es, err := decodeMessage(b, nil)
		if err != nil {
			return
		}
		if h.flags&flagSkip != 0 {
			return // padding: body bytes are unspecified
		}
		re := encodeMessage(h, es)
		require.Equal(t, b[:h.total], re)
	})
}
