package server

import (
	"sync"
	"sync/atomic"
)

// A plain Thrift client (no HatRPC framing) relies on one connection's
// messages running in the order they were sent, oneway calls included:
// Apache's servers run them one at a time, so a oneway poke(6) followed
// by a call that reads what it did must see it done. The reader still
// reads ahead (a long call's successor is read, and waits, while it
// runs), but a plain call's handler starts only once the handler of the
// call before it returned. HatRPC connections carry seqids and a
// pending table, and their calls run concurrently.

// turns hands out a plain connection's calls their turns: the reader
// numbers them (conn.turnIn), each runs when ran reaches its number.
type turns struct {
	ran     atomic.Uint64 // calls of the connection that ran
	waiting atomic.Int32  // callers blocked in await
	cond    *sync.Cond    // on the conn's mutex, made by the first waiter
}

// takeTurn numbers a plain call in the order it was read (the reader
// calls it, holding the read role).
func (c *conn) takeTurn(r *request) {
	r.turn, r.ordered = c.turnIn, true
	c.turnIn++
}

// await blocks until every call numbered before turn has run. The call
// before is most often done already: one atomic load, no lock.
func (t *turns) await(mu *sync.Mutex, turn uint64) {
	if t.ran.Load() == turn {
		return
	}
	mu.Lock()
	if t.cond == nil {
		t.cond = sync.NewCond(mu)
	}
	t.waiting.Add(1)
	for t.ran.Load() != turn {
		t.cond.Wait()
	}
	t.waiting.Add(-1)
	mu.Unlock()
}

// done ends a turn and wakes the waiters, if any. A waiter registers
// (waiting) before it looks at ran, and done adds to ran before it
// looks at waiting, so one of them sees the other; the broadcast is
// made under mu, so it cannot fall between a waiter's look and its Wait.
func (t *turns) done(mu *sync.Mutex) {
	t.ran.Add(1)
	if t.waiting.Load() > 0 {
		mu.Lock()
		t.cond.Broadcast()
		mu.Unlock()
	}
}
