package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func endpoints(inflight ...int64) []*endpoint {
	eps := make([]*endpoint, len(inflight))
	for i, n := range inflight {
		eps[i] = &endpoint{addr: string(rune('a' + i))}
		eps[i].inflight.Store(n)
	}
	return eps
}

func TestRoundRobinTakesTurns(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		picks int
	}{
		{"one server", 1, 5},
		{"three servers", 3, 3000},
		{"two servers, odd count", 2, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := RoundRobin()
			eps := endpoints(make([]int64, tt.n)...)
			got := map[*endpoint]int{}
			for i := range tt.picks {
				e := b.pick(eps)
				assert.Same(t, eps[i%tt.n], e, "pick %d", i)
				got[e]++
			}
			for _, e := range eps {
				assert.InDelta(t, tt.picks/tt.n, got[e], 1)
			}
		})
	}
}

// TestP2CPrefersIdle: of two servers drawn, the one with fewer calls in
// flight wins; so an idle server among two busy ones wins every draw it
// is part of, two draws in three.
func TestP2CPrefersIdle(t *testing.T) {
	b := PowerOfTwoChoices()
	t.Run("two servers: always the idle one", func(t *testing.T) {
		eps := endpoints(4, 1)
		for range 100 {
			assert.Same(t, eps[1], b.pick(eps))
		}
	})
	t.Run("one of three idle", func(t *testing.T) {
		eps := endpoints(10, 0, 10)
		const n = 3000
		got := map[*endpoint]int{}
		for range n {
			got[b.pick(eps)]++
		}
		// Expected 2000 (two of the three pairs hold it); ±100 is about
		// four standard deviations of the random draw.
		assert.InDelta(t, 2*n/3, got[eps[1]], 100, "%v", got)
		assert.InDelta(t, got[eps[0]], got[eps[2]], 200, "the busy two split the rest")
	})
	t.Run("equal load: fair", func(t *testing.T) {
		eps := endpoints(0, 0, 0)
		const n = 3000
		got := map[*endpoint]int{}
		for range n {
			got[b.pick(eps)]++
		}
		for _, e := range eps {
			assert.InDelta(t, n/3, got[e], 100, "%v", got)
		}
	})
	t.Run("single server", func(t *testing.T) {
		eps := endpoints(7)
		assert.Same(t, eps[0], b.pick(eps))
	})
}
