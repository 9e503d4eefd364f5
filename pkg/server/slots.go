package server

import (
	"sync/atomic"
	"time"
)

// slotSem bounds the calls executing at once (WithMaxConcurrentCalls).
// A free slot costs one compare-and-swap to take and one add to give
// back (a channel semaphore took its lock both ways); only a caller that
// must wait touches a channel.
type slotSem struct {
	used    atomic.Int64
	max     int64
	waiters atomic.Int64
	wake    chan struct{} // a release's token for one waiter
}

func newSlotSem(n int) *slotSem {
	return &slotSem{max: int64(n), wake: make(chan struct{}, 1)}
}

// tryAcquire takes a slot if one is free and nobody waits for one: a
// caller that has waited goes first.
func (s *slotSem) tryAcquire() bool {
	if s.waiters.Load() != 0 {
		return false
	}
	return s.take()
}

func (s *slotSem) take() bool {
	for {
		n := s.used.Load()
		if n >= s.max {
			return false
		}
		if s.used.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquire waits for a slot until timeout fires or done is closed (nil
// channels never do); false if none came.
func (s *slotSem) acquire(timeout <-chan time.Time, done <-chan struct{}) bool {
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	for {
		if s.take() {
			// Two releases may have left one token: hand the wake-up on
			// while slots are still free.
			if s.waiters.Load() > 1 && s.used.Load() < s.max {
				s.signal()
			}
			return true
		}
		select {
		case <-s.wake:
		case <-timeout:
			return false
		case <-done:
			return false
		}
	}
}

// release gives a slot back and wakes a waiter if there is one. The
// waiter counts itself before it last tries, and release frees before it
// looks: one of the two always sees the other.
func (s *slotSem) release() {
	s.used.Add(-1)
	if s.waiters.Load() != 0 {
		s.signal()
	}
}

func (s *slotSem) signal() {
	select {
	case s.wake <- struct{}{}:
	default: // a token is pending already
	}
}

// inUse is how many slots are taken; full tells whether all are.
func (s *slotSem) inUse() int64 { return s.used.Load() }
func (s *slotSem) full() bool   { return s.used.Load() >= s.max }
