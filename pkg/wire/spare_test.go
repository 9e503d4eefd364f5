package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A spare: a small buffer given back is the next one taken (no pool
// operation), emptied; a large one, a nil one, or a second while one is
// held is refused, so the pools get it instead of an owner pinning it.
func TestSpare(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		held     bool
	}{
		{"small", 4 << 10, true},
		{"just under large", largeMin - 1, true},
		{"large", largeMin, false},
		{"huge", maxPooledBuf + 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Spare
			b := append(make([]byte, 0, tc.capacity), "message"...)
			require.Equal(t, tc.held, s.Hold(&b))
			if !tc.held {
				assert.Equal(t, []byte("message"), b, "a refused buffer stays its owner's, untouched")
				assert.Nil(t, s.bp)
				s.Keep(&b) // to the pool
				assert.Nil(t, s.bp, "a large buffer is not kept")
				return
			}
			require.Same(t, &b, s.bp)
			assert.Empty(t, b, "held empty")
			again := make([]byte, 0, 64)
			assert.False(t, s.Hold(&again), "one buffer at most")
			s.Keep(&again)
			assert.Same(t, &b, s.bp, "the one held stays; another goes to the pool")
			assert.Same(t, &b, s.Get())
			assert.Nil(t, s.bp, "taken, not shared")
			assert.NotSame(t, &b, s.Get(), "empty: from the pool")
		})
	}
}

func TestSpareHoldNil(t *testing.T) {
	var s Spare
	assert.False(t, s.Hold(nil))
	s.Keep(nil) // PutBuf(nil) is a no-op
	assert.Nil(t, s.bp)
}

// From moves a buffer between two owners only into an empty holder, so
// neither ever holds two and none is dropped.
func TestSpareFrom(t *testing.T) {
	one, two := make([]byte, 0, 64), make([]byte, 0, 64)
	tests := []struct {
		name           string
		dst, src       *[]byte
		wantDst, wantS *[]byte
	}{
		{"into empty", nil, &one, &one, nil},
		{"into held: stays", &two, &one, &two, &one},
		{"from empty", &two, nil, &two, nil},
		{"both empty", nil, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst, src := Spare{bp: tc.dst}, Spare{bp: tc.src}
			dst.From(&src)
			assert.Same(t, tc.wantDst, dst.bp)
			assert.Same(t, tc.wantS, src.bp)
		})
	}
}

func TestSpareRelease(t *testing.T) {
	var s Spare
	s.Release() // empty: nothing to do
	b := make([]byte, 0, 64)
	require.True(t, s.Hold(&b))
	s.Release()
	assert.Nil(t, s.bp, "given back to the pool")
	s.Release() // twice: nothing left to give back
	assert.Nil(t, s.bp)
}
