package wire

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TakeFrame takes a frame the reader holds whole, as ReadFrameCharged
// would read it, asking charge first for a large one; a refused frame is
// left unread.
func TestTakeFrame(t *testing.T) {
	refuse := errors.New("no room")
	frame := func(n int) []byte {
		f := make([]byte, HeaderSize+n)
		for i := range n {
			f[HeaderSize+i] = byte(i)
		}
		SealFrame(f, KindCall, 0, 7, 0)
		return f
	}
	tests := []struct {
		name    string
		payload int
		refused bool // charge refuses every frame it is asked about
		charged int  // bytes charge was asked for
	}{
		{"small frame, not charged", 100, true, 0},
		{"large frame charged", ChargeMin, false, HeaderSize + ChargeMin},
		{"large frame refused", ChargeMin, true, HeaderSize + ChargeMin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := frame(tt.payload)
			stream := append(append([]byte(nil), f...), frame(3)...)
			br := bufio.NewReaderSize(bytes.NewReader(stream), 2*len(stream))
			hb, err := br.Peek(HeaderSize)
			require.NoError(t, err)
			h, err := DecodeHeader(hb, 1<<20)
			require.NoError(t, err)
			_, _ = br.Peek(len(stream)) // buffered whole, as TakeFrame's callers know
			charged := 0
			got, err := TakeFrame(br, &h, nil, func(n int) error {
				charged += n
				if tt.refused {
					return refuse
				}
				return nil
			})
			require.Equal(t, tt.charged, charged)
			if tt.refused && tt.charged > 0 {
				var ce *ChargeError
				require.ErrorAs(t, err, &ce)
				require.ErrorIs(t, err, refuse)
				require.Equal(t, len(f), ce.Size)
				require.Empty(t, got)
				require.Equal(t, len(stream), br.Buffered(), "a refused frame stays unread")
				return
			}
			require.NoError(t, err)
			require.Equal(t, f, got)
			h2, next, err := ReadFrame(br, nil, 1<<20)
			require.NoError(t, err, "the reader is at the next frame")
			require.Equal(t, int32(7), h2.Seqid)
			require.Len(t, next, HeaderSize+3)
		})
	}
}

// FrameBuffered says whether the next frame is in the buffer whole, by
// its length field, whatever follows it.
func TestFrameBuffered(t *testing.T) {
	f := make([]byte, HeaderSize+10)
	SealFrame(f, KindReply, 0, 1, 0)
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"empty", nil, false},
		{"part of the length", f[:3], false},
		{"header only", f[:HeaderSize], false},
		{"one byte short", f[:len(f)-1], false},
		{"whole", f, true},
		{"whole and part of the next", append(append([]byte(nil), f...), f[:5]...), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(bytes.NewReader(tt.in), 4096)
			_, _ = br.Peek(len(tt.in)) // all of it buffered
			require.Equal(t, tt.want, FrameBuffered(br))
		})
	}
}
