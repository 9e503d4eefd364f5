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

// plainAhead bounds the calls a plain connection's reader reads ahead of
// the one running: they only wait their turn, each holding a goroutine,
// a slot of WithMaxConcurrentCalls and its request's memory. Unbounded,
// a flood of oneway calls (issue 43, D5: fb303 shutdown/reinitialize on
// 8 connections) filled the server's 4,096 slots with waiting
// goroutines, each turn waking them all, and the server was still
// working through them 10 s after the flood. At plainAhead the reader
// stops reading (the client's writes then wait on TCP's window) until
// the call running ends; a pipelining client still has 32 calls read
// and decoded ahead, and a vanishing client is seen once those ran.
const plainAhead = 32

// awaitAhead blocks while plainAhead or more calls numbered before next
// have not run (the reader calls it before reading the next call).
func (t *turns) awaitAhead(mu *sync.Mutex, next uint64) {
	if next-t.ran.Load() < plainAhead {
		return
	}
	mu.Lock()
	if t.cond == nil {
		t.cond = sync.NewCond(mu)
	}
	t.waiting.Add(1)
	for next-t.ran.Load() >= plainAhead {
		t.cond.Wait()
	}
	t.waiting.Add(-1)
	mu.Unlock()
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
