package flock

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The combining queue alone: every node is served exactly once, by one
// leader at a time, in batches no larger than the bound, including when a
// leader serves only part of what it collected.
func TestCombinerServesEachNodeOnce(t *testing.T) {
	tests := []struct {
		name    string
		g, n    int
		max     int
		partial bool
	}{
		{"uncontended", 1, 1000, 8, false},
		{"contended", 64, 200, 8, false},
		{"partial batches", 32, 200, 16, true},
		{"batch of one", 16, 200, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var inLeader atomic.Int32
			served := make([]int32, tc.g*tc.n) // guarded by leadership
			var batches, maxSeen, total int
			c := combiner{max: tc.max}
			c.serve = func(b []*node) int {
				assert.Equal(t, int32(1), inLeader.Add(1), "two leaders at once")
				defer inLeader.Add(-1)
				k := len(b)
				if tc.partial && k > 1 {
					k = (k + 1) / 2
				}
				for _, n := range b[:k] {
					served[n.caller]++
				}
				batches++
				total += k
				maxSeen = max(maxSeen, len(b))
				return k
			}
			var wg sync.WaitGroup
			for g := 0; g < tc.g; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					nd := newNode()
					for i := 0; i < tc.n; i++ {
						nd.reset()
						nd.caller = uint32(g*tc.n + i)
						c.submit(nd)
					}
				}()
			}
			wg.Wait()
			for i, s := range served {
				require.Equal(t, int32(1), s, "node %d", i)
			}
			require.Equal(t, tc.g*tc.n, total)
			require.LessOrEqual(t, maxSeen, tc.max)
			require.Nil(t, c.tail.Load())
			t.Logf("%d batches, mean degree %.2f", batches, float64(total)/float64(batches))
		})
	}
}
