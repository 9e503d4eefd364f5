package server

import (
	"context"
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
)

// callCtx is the context of one HatRPC call. It replaces
// context.WithDeadline/WithCancel on the hot path: the deadline timer and the
// parent watch are only set up if the handler actually asks for Done, so a
// handler that never blocks on its context costs one small allocation.
type callCtx struct {
	parent   context.Context // the connection's context
	deadline time.Time
	sc       *metadata.ServerCall // the call's headers, if it has any

	mu      sync.Mutex
	done    chan struct{}
	err     error
	timer   *time.Timer
	unwatch func() bool
}

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
	c.refreshLocked()
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.unwatch = context.AfterFunc(c.parent, func() { c.cancel(context.Canceled) })
	if !c.deadline.IsZero() {
		c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	}
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.refreshLocked()
		if c.err != nil && c.done != nil {
			close(c.done)
		}
	}
	return c.err
}

// refreshLocked notices a parent cancellation or a passed deadline that no
// watcher reported yet.
func (c *callCtx) refreshLocked() {
	if c.err != nil {
		return
	}
	if c.parent.Err() != nil {
		c.err = context.Canceled
	} else if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
}

func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// release ends the call: watchers stop and the context reads as cancelled,
// like the CancelFunc of context.WithCancel.
func (c *callCtx) release() {
	c.mu.Lock()
	if c.err == nil {
		c.err = context.Canceled
		if c.done != nil {
			close(c.done)
		}
	}
	t, unwatch := c.timer, c.unwatch
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if unwatch != nil {
		unwatch()
	}
}
