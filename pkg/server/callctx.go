package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// callCtx is the context of one HatRPC call. It replaces
// context.WithDeadline/WithCancel on the hot path: the deadline timer and the
// parent watch are only set up if the handler actually asks for Done, so a
// handler that never blocks on its context costs one small allocation, and
// ending its call takes no lock.
type callCtx struct {
	parent   context.Context // the connection's context
	deadline time.Time
	sc       *metadata.ServerCall // the call's headers, if it has any

	state   atomic.Uint32 // ctxLive, or how the call ended
	watched atomic.Bool   // Done was asked for: done (and maybe watchers) exist

	mu      sync.Mutex // Done's channel and its watchers
	done    chan struct{}
	closed  bool
	timer   *time.Timer
	unwatch func() bool
}

// callCtx states.
const (
	ctxLive uint32 = iota
	ctxCanceled
	ctxDeadline
)

var _ context.Context = (*callCtx)(nil)

func newCallCtx(parent context.Context, timeout time.Duration) *callCtx {
	c := &callCtx{parent: parent}
	if timeout > 0 {
		c.deadline = time.Now().Add(timeout)
	}
	return c
}

// deadlineAt is the deadline of a call that started at (since epoch) with
// the timeout, zero for none: the clock read that times the call also
// gives its deadline, monotonic like time.Now's.
func deadlineAt(at, timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return epoch.Add(at + timeout)
}

// ctxSlab hands out call contexts carved from blocks, one allocation per
// ctxSlabSize calls instead of one a call. A context is never handed out
// twice: a handler may keep its context past the call, and it must go on
// reading as cancelled (a kept one pins its block, ~2 KiB, no more).
type ctxSlab struct{ blk []callCtx }

const ctxSlabSize = 16

func (s *ctxSlab) next(parent context.Context, deadline time.Time) *callCtx {
	if len(s.blk) == 0 {
		s.blk = make([]callCtx, ctxSlabSize)
	}
	c := &s.blk[0]
	s.blk = s.blk[1:]
	c.parent, c.deadline = parent, deadline
	return c
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Value answers for the call's headers itself: one context.WithValue
// less per call that carries headers.
func (c *callCtx) Value(key any) any {
	if c.sc != nil && metadata.IsServerCallKey(key) {
		return c.sc
	}
	return c.parent.Value(key)
}

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	// Counted as watched before the state is looked at, as end sets the
	// state before it looks: one of the two closes the channel.
	c.watched.Store(true)
	if c.state.Load() == ctxLive {
		if why := c.expired(); why != ctxLive {
			c.state.CompareAndSwap(ctxLive, why)
		}
	}
	if c.state.Load() != ctxLive {
		c.closeLocked()
		return c.done
	}
	c.unwatch = context.AfterFunc(c.parent, func() { c.end(ctxCanceled) })
	if !c.deadline.IsZero() {
		c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(ctxDeadline) })
	}
	return c.done
}

func (c *callCtx) Err() error {
	s := c.state.Load()
	if s == ctxLive {
		// A parent cancellation or a passed deadline no watcher reported.
		why := c.expired()
		if why == ctxLive {
			return nil
		}
		c.end(why)
		s = c.state.Load()
	}
	if s == ctxDeadline {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// expired tells whether the parent ended or the deadline passed.
func (c *callCtx) expired() uint32 {
	if c.parent.Err() != nil {
		return ctxCanceled
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return ctxDeadline
	}
	return ctxLive
}

func (c *callCtx) cancel(err error) {
	why := ctxCanceled
	if err == context.DeadlineExceeded {
		why = ctxDeadline
	}
	c.end(why)
}

// end ends the call's context for the reason why, unless it has ended.
func (c *callCtx) end(why uint32) {
	if !c.state.CompareAndSwap(ctxLive, why) {
		return
	}
	if c.watched.Load() {
		c.mu.Lock()
		c.closeLocked()
		c.mu.Unlock()
	}
}

func (c *callCtx) closeLocked() {
	if c.done != nil && !c.closed {
		close(c.done)
		c.closed = true
	}
}

// release ends the call: watchers stop and the context reads as cancelled,
// like the CancelFunc of context.WithCancel.
func (c *callCtx) release() {
	c.end(ctxCanceled)
	if !c.watched.Load() {
		return // no channel, no watchers (a later Done sees the state)
	}
	c.mu.Lock()
	t, unwatch := c.timer, c.unwatch
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if unwatch != nil {
		unwatch()
	}
}
