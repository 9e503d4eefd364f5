package proto

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVarintMatchesStdlib checks the word-at-a-time varint code against
// encoding/binary for every length and the boundaries between lengths.
func TestVarintMatchesStdlib(t *testing.T) {
	vals := []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		vals = append(vals, rng.Uint64()>>rng.UintN(64))
	}
	for _, v := range vals {
		want := binary.AppendUvarint(nil, v)
		require.Equal(t, want, appendVarint(nil, v), "appendVarint(%#x)", v)
		w := NewCompactWriter(make([]byte, 0, 64))
		w.writeVarint(v)
		require.Equal(t, want, w.Bytes(), "writeVarint(%#x)", v)

		for _, pad := range []int{0, 3, 16} { // near the end and with slack
			in := append(append([]byte(nil), want...), make([]byte, pad)...)
			r := NewCompactReader(in, nil)
			got, err := r.uvarint()
			require.NoError(t, err)
			require.Equal(t, v, got)
			require.Equal(t, len(want), r.Pos())

			r.Reset(in)
			i64, err := r.ReadI64()
			require.NoError(t, err)
			require.Equal(t, int64(v>>1)^-int64(v&1), i64)
			require.Equal(t, len(want), r.Pos())
		}
	}
}

func TestVarintOverflowRejected(t *testing.T) {
	in := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0}
	r := NewCompactReader(in, nil)
	_, err := r.ReadI64()
	require.ErrorIs(t, err, ErrInvalidVarint)
	r.Reset(in)
	_, err = r.uvarint()
	require.ErrorIs(t, err, ErrInvalidData)
}
