package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFrame is a HatRPC frame of payload bytes whose payload is the byte
// seq repeated, so a frame read out of order or mixed with another shows.
func testFrame(seq int32, payload int) []byte {
	b := make([]byte, HeaderSize+payload)
	for i := HeaderSize; i < len(b); i++ {
		b[i] = byte(seq)
	}
	SealFrame(b, KindStreamData, 0, seq, 0)
	return b
}

func TestReadAheadTakesNextHeader(t *testing.T) {
	// The frames are all written before the reader starts (on loopback a
	// write is in the peer's receive queue when it returns), so the tail
	// of the large frame and the next header are there for one readv.
	tests := []struct {
		name  string
		sizes []int // payloads; the first is read through a 4 KiB buffer in two parts
		ahead int   // bytes the first tail's read takes beyond the frame
	}{
		{"small frame next", []int{40 << 10, 100}, HeaderSize},
		{"large frame next", []int{40 << 10, 50 << 10}, HeaderSize},
		{"header-only frame next", []int{40 << 10, 0}, HeaderSize},
		{"nothing next", []int{40 << 10}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpPair(t)
			var all []byte
			for i, n := range tt.sizes {
				all = append(all, testFrame(int32(i+1), n)...)
			}
			_, err := a.Write(all)
			require.NoError(t, err)
			sr := NewSpinReader(b)
			require.NotNil(t, sr)
			br := bufio.NewReaderSize(sr, 4<<10)
			var dst []byte
			for i, n := range tt.sizes {
				h, got, err := ReadFrameFrom(br, sr, dst[:0], 1<<20)
				require.NoError(t, err)
				assert.Equal(t, int32(i+1), h.Seqid)
				assert.Equal(t, testFrame(int32(i+1), n), got)
				if i == 0 {
					assert.Equal(t, tt.ahead, sr.aheadLen, "bytes read ahead with the first frame's tail")
				}
				dst = got
			}
			assert.Zero(t, sr.aheadLen)
			assert.Zero(t, br.Buffered())
		})
	}
}

func TestReadAheadOrderUnderConcurrency(t *testing.T) {
	// A writer sends frames of mixed sizes while the reader reads them
	// with read-ahead: every frame arrives whole and in order, whatever
	// the interleaving of the writes and the readvs.
	a, b := tcpPair(t)
	sizes := []int{0, 1, 100, 33 << 10, 64 << 10, 70000, 5, 128 << 10, 40 << 10, 4 << 10, 200 << 10, 17}
	const rounds = 20
	werr := make(chan error, 1)
	go func() {
		var err error
		for r := 0; r < rounds && err == nil; r++ {
			for i, n := range sizes {
				if _, err = a.Write(testFrame(int32(r*len(sizes)+i+1), n)); err != nil {
					break
				}
			}
		}
		werr <- err
	}()
	sr := NewSpinReader(b)
	br := bufio.NewReaderSize(sr, 32<<10)
	var dst []byte
	for r := 0; r < rounds; r++ {
		for i, n := range sizes {
			seq := int32(r*len(sizes) + i + 1)
			h, got, err := ReadFrameFrom(br, sr, dst[:0], 1<<20)
			require.NoError(t, err, "frame %d", seq)
			require.Equal(t, seq, h.Seqid)
			require.True(t, bytes.Equal(testFrame(seq, n), got), "frame %d: content", seq)
			dst = got
		}
	}
	require.NoError(t, <-werr)
}

func TestReadAheadEOF(t *testing.T) {
	// A peer that closes mid-frame fails the tail's read with
	// ErrUnexpectedEOF, as a plain read would.
	a, b := tcpPair(t)
	f := testFrame(1, 40<<10)
	_, err := a.Write(f[:len(f)-100])
	require.NoError(t, err)
	require.NoError(t, a.Close())
	sr := NewSpinReader(b)
	_, _, err = ReadFrameFrom(bufio.NewReaderSize(sr, 4<<10), sr, nil, 1<<20)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// plainReader hides every method but Read.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

func TestReadAheadPlainReader(t *testing.T) {
	// A reader that cannot read ahead (not a socket) reads the tail as
	// before.
	var all []byte
	for i, n := range []int{40 << 10, 10} {
		all = append(all, testFrame(int32(i+1), n)...)
	}
	raw := plainReader{bytes.NewReader(all)}
	br := bufio.NewReaderSize(raw, 4<<10)
	for i, n := range []int{40 << 10, 10} {
		h, got, err := ReadFrameFrom(br, raw, nil, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, int32(i+1), h.Seqid)
		assert.Equal(t, testFrame(int32(i+1), n), got, fmt.Sprint("frame ", i+1))
	}
}
