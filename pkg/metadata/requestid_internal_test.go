package metadata

import (
	"encoding/binary"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// unmixID inverts mixID: a xor with v>>s undoes with the xor of v>>s,
// v>>2s, ...; a multiplication by an odd number with its inverse mod
// 2^64. That it exists is why ids from distinct numbers differ.
func unmixID(v uint64) uint64 {
	v ^= v>>31 ^ v>>62
	v *= oddInverse(0x94d049bb133111eb)
	v ^= v>>27 ^ v>>54
	v *= oddInverse(0xbf58476d1ce4e5b9)
	v ^= v>>30 ^ v>>60
	return v
}

// oddInverse returns x with a*x = 1 mod 2^64 (Newton's iteration doubles
// the bits that are right each step; a itself is right in 3).
func oddInverse(a uint64) uint64 {
	x := a
	for range 5 {
		x *= 2 - a*x
	}
	return x
}

func TestMixIDInvertible(t *testing.T) {
	cases := []struct {
		name string
		v    uint64
	}{
		{"zero", 0},
		{"one", 1},
		{"last before the wrap", ^uint64(0)},
		{"high bit", 1 << 63},
		{"arbitrary", 0x0123456789abcdef},
		{"low half", 0xffffffff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for d := range uint64(64) {
				require.Equal(t, tc.v+d, unmixID(mixID(tc.v+d)))
			}
		})
	}
}

// TestRequestIDsConcurrent: ids drawn at once from many goroutines, the
// counter wrapping among them, are 16 hex digits and never repeat.
func TestRequestIDsConcurrent(t *testing.T) {
	old := ridNext.Load()
	t.Cleanup(func() { ridNext.Store(old) })
	ridNext.Store(^uint64(0) - 500)
	const workers, each = 8, 250
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], string(AppendRequestID(nil)))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, l := range ids {
		for _, id := range l {
			require.Regexp(t, "^[0-9a-f]{16}$", id)
			require.False(t, seen[id], "repeated %s", id)
			seen[id] = true
		}
	}
	require.Len(t, seen, workers*each)
}

// TestAppendIDDigits pins the id's text: hex of v's bytes, least
// significant first, as ids were written before appendID wrote its own
// digits (a peer or log that parses them sees the same form).
func TestAppendIDDigits(t *testing.T) {
	values := []uint64{0, 1, 9, 10, 0xf, 0x10, 0x9a, 0xa9, 0xdeadbeef, 0x0123456789abcdef, 0xfedcba9876543210, ^uint64(0), mixID(42)}
	for i := range uint64(4096) { // every digit value at every position, with neighbours
		values = append(values, mixID(i), i*0x1111111111111111, ^(i * 0x0101010101010101))
	}
	for _, v := range values {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		require.Equal(t, "id="+hex.EncodeToString(b[:]), string(appendID([]byte("id="), v)), "v=%#x", v)
	}
}
