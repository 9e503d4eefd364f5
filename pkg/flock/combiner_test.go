package flock

import (
	"sync"
	"sync/atomic"
	"testing"

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
				defer leading(t, &inLeader)()
				k := portion(len(b), tc.partial)
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

// Async and detached submitters under contention: every node is served
// exactly once by one leader at a time; an async follower hears of nothing
// but its answer, a failure or leadership; a detached node is never waited
// for and returns to its pool once served; a leader hands off only to
// submitters that are waiting.
func TestCombinerWaitModes(t *testing.T) {
	tests := []struct {
		name    string
		mode    waitMode
		g, n    int
		max     int
		partial bool
		failing bool // serve fails every 7th node
	}{
		{"async", waitAsync, 64, 200, 8, false, false},
		{"async partial batches", waitAsync, 32, 200, 16, true, false},
		{"async with failures", waitAsync, 32, 200, 8, true, true},
		{"detached", waitNone, 64, 200, 8, false, false},
		{"detached partial batches", waitNone, 32, 200, 16, true, false},
		{"detached batch of one", waitNone, 16, 200, 1, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var inLeader atomic.Int32
			total := tc.g * tc.n
			served := make([]int32, total) // guarded by leadership
			answers := make([]chan struct{}, tc.g)
			for i := range answers {
				answers[i] = make(chan struct{}, 1)
			}
			var done atomic.Int64
			var pool nodePool
			c := combiner{max: tc.max}
			c.serve = func(b []*node) int {
				defer leading(t, &inLeader)()
				k := portion(len(b), tc.partial)
				for _, n := range b[:k] {
					served[n.caller]++
					if tc.failing && n.caller%7 == 0 {
						n.err = errInactive
						continue
					}
					done.Add(1)
					if n.wait == waitAsync {
						answers[n.caller/uint32(tc.n)] <- struct{}{} // the "response"
					}
				}
				return k
			}
			var wg sync.WaitGroup
			var failures atomic.Int64
			for g := 0; g < tc.g; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					nd := newNode()
					for i := 0; i < tc.n; i++ {
						id := uint32(g*tc.n + i)
						if tc.mode == waitNone {
							n := pool.get()
							n.caller = id
							c.submitAsync(n)
							continue
						}
						nd.reclaim()
						nd.reset()
						nd.wait, nd.caller = waitAsync, id
						served := c.submitAsync(nd)
						for !served {
							select {
							case sig := <-nd.sig:
								if sig == sigLeader {
									c.lead(nd)
								} else {
									require.Error(t, nd.err, "sigDone without a failure")
									nd.free.Store(true)
								}
								served = true
							case <-answers[g]:
								served = true
							}
						}
						if nd.err != nil {
							failures.Add(1)
						} else if len(answers[g]) > 0 {
							<-answers[g] // answered while we led
						}
					}
				}()
			}
			wg.Wait()
			// Detached submitters return before their nodes are served.
			eventually(t, func() bool { return int(done.Load()+failures.Load()) == total }, "every node served")
			for i, s := range served {
				require.Equal(t, int32(1), s, "node %d", i)
			}
			// The last detached leader may still be finishing its batch.
			eventually(t, func() bool { return c.tail.Load() == nil }, "queue empty")
			if tc.failing {
				require.Equal(t, int64((total+6)/7), failures.Load())
			}
			if tc.mode == waitNone {
				eventually(t, func() bool {
					pool.mu.Lock()
					defer pool.mu.Unlock()
					return int(pool.made.Load()) == len(pool.free)
				}, "every node back in the pool")
				pool.mu.Lock()
				defer pool.mu.Unlock()
				for _, n := range pool.free {
					require.True(t, n.free.Load(), "a pooled node still queued")
				}
			}
		})
	}
}
