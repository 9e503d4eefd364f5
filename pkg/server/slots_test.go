package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hatrpc/hatrpc/test/testenv"
	"github.com/stretchr/testify/require"
)

func TestSlotSem(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		s := newSlotSem(2)
		require.True(t, s.tryAcquire())
		require.True(t, s.tryAcquire())
		require.False(t, s.tryAcquire())
		require.True(t, s.full())
		s.release()
		require.EqualValues(t, 1, s.inUse())
		require.True(t, s.tryAcquire())
	})
	t.Run("timeout-and-done", func(t *testing.T) {
		s := newSlotSem(1)
		require.True(t, s.tryAcquire())
		fired := make(chan time.Time, 1)
		fired <- time.Time{}
		require.False(t, s.acquire(fired, nil))
		done := make(chan struct{})
		close(done)
		require.False(t, s.acquire(nil, done))
		require.Zero(t, s.waiters.Load())
		require.EqualValues(t, 1, s.inUse())
	})
	t.Run("release-wakes-every-waiter", func(t *testing.T) {
		s := newSlotSem(3)
		for range 3 {
			require.True(t, s.tryAcquire())
		}
		const n = 3
		got := make(chan bool, n)
		for range n {
			go func() { got <- s.acquire(nil, nil) }()
		}
		require.Eventually(t, func() bool { return s.waiters.Load() == n }, testenv.HangGuard(10*time.Second), time.Millisecond)
		// While anyone waits, a newcomer does not jump the queue.
		require.False(t, s.tryAcquire())
		for range n { // back to back: tokens fold, wake-ups are handed on
			s.release()
		}
		for range n {
			select {
			case ok := <-got:
				require.True(t, ok)
			case <-time.After(testenv.HangGuard(10 * time.Second)):
				t.Fatal("a waiter was not woken although a slot was free")
			}
		}
		require.True(t, s.full())
	})
	t.Run("never-over-the-limit", func(t *testing.T) {
		const limit, workers, rounds = 3, 8, 2000
		s := newSlotSem(limit)
		var running, most atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if !s.tryAcquire() && !s.acquire(nil, nil) {
						t.Error("acquire without timeout failed")
						return
					}
					n := running.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					running.Add(-1)
					s.release()
				}
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, most.Load(), int64(limit))
		require.Zero(t, s.inUse())
		require.Zero(t, s.waiters.Load())
	})
}
