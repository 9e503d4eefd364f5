package metadata

import (
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
