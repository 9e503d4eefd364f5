package proto

import (
	"bytes"
	"encoding/binary"
	"fmt"
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

// TestReadI64sMalformed checks the block decoder of ReadI64s reports
// exactly what element-by-element ReadI64 does (error text, which carries
// the offset, or values and end position) for varints that are too long,
// overflow in byte 10, or are cut off, wherever they sit relative to the
// 64-byte blocks.
func TestReadI64sMalformed(t *testing.T) {
	ff := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	bad := []struct {
		name string
		v    []byte
	}{
		{"11 bytes", append(ff(10), 0x01)},
		{"overflow in byte 10", append(ff(9), 0x02)},
		{"byte 10 continues", append(ff(9), 0x81, 0x00)},
		{"no stop byte", ff(100)},
		{"max 10 bytes", append(ff(9), 0x01)},
		{"10 bytes zero top", append(ff(9), 0x00)},
		{"9 bytes", append(ff(8), 0x7f)},
		{"1 byte", []byte{0x05}},
	}
	for _, b := range bad {
		for _, before := range []int{0, 1, 7, 9, 30, 55, 60, 63, 64, 70, 130} {
			for _, after := range []int{0, 5, 100} {
				// before one-byte and after three-byte elements around v
				in := bytes.Repeat([]byte{0x02}, before)
				in = append(in, b.v...)
				in = append(in, bytes.Repeat([]byte{0x81, 0x80, 0x01}, after)...)
				n := before + 1 + after
				for _, cut := range []int{len(in), len(in) - 1, before + len(b.v) - 1} {
					t.Run(fmt.Sprintf("%s/%d/%d/%d", b.name, before, after, cut), func(t *testing.T) {
						compareI64s(t, in[:cut], n)
					})
				}
			}
		}
	}
}

// compareI64s decodes n i64 elements of in with ReadI64s and with ReadI64
// and requires the same outcome.
func compareI64s(t *testing.T, in []byte, n int) {
	r1 := NewCompactReader(in, nil)
	want := make([]int64, 0, n)
	var err1 error
	for range n {
		var v int64
		if v, err1 = r1.ReadI64(); err1 != nil {
			break
		}
		want = append(want, v)
	}
	r2 := NewCompactReader(in, nil)
	got := make([]int64, n)
	err2 := r2.ReadI64s(got)
	if err1 != nil {
		require.Error(t, err2)
		require.ErrorIs(t, err2, ErrInvalidData)
		require.Equal(t, err1.Error(), err2.Error())
		return
	}
	require.NoError(t, err2)
	require.Equal(t, want, got)
	require.Equal(t, r1.Pos(), r2.Pos())
}

// TestReadI64sLengths runs ReadI64s over random mixes of every varint
// length, long enough for the block path, against ReadI64.
func TestReadI64sLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		n := 1 + rng.IntN(300)
		w := NewCompactWriter(nil)
		for range n {
			w.WriteI64(int64(rng.Uint64() >> rng.UintN(64)))
		}
		compareI64s(t, w.Bytes(), n)
		compareI64s(t, w.Bytes(), n+1) // input ends early
	}
}
