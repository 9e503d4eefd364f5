package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Spreading calls over several TCP connections.
//
// One loopback TCP connection carries at most ~10k echoes of 128 KiB a
// second however little work the two ends do, and its server side decodes
// and answers on one reader; a Conn with many large calls in flight is
// faster over several connections. Small calls are not: one connection
// coalesces their writes, and a lone caller keeps the latency of one
// connection. So a Conn starts with one connection and, against a HatRPC
// server only, opens more (up to WithConns) in the background once the
// bytes in flight on it pass spreadBytes; each call then takes the
// connection with the fewest calls in flight, the first on a tie.
//
// How many connections pays depends on the call size (atb-tcp, 64 callers,
// 2026-11-23): 128 KiB echoes went from 9.6k calls/s on 4 connections to
// 11.2k on 16 (8: 9.8k, 32: 11.2k, 64: 9.9k), 4 KiB ones from 136k on 4
// to 126k on 16. A large call occupies a connection for its whole
// transfer; small calls only split the batches their writes coalesce
// into. So calls under spreadBytes each spread over at most smallConns.
// Once both ends borrowed their binaries (borrow_args, CallBorrowed) and a
// large call cost less CPU at either end, 32 connections beat 16 in every
// one of five alternating pairs at 128 KiB (2026-11-24: 21.6-24.1k against
// 17.6-20.8k calls/s), so the default is now 32.
//
// Extra connections never carry lanes or the handshake's plan checks
// (those stay on the first connection), and a plain Thrift peer is never
// given one: a single-threaded server (Python's TSimpleServer) accepts a
// second connection into its backlog and serves it only after the first
// closes.

// errNotUpgraded: an extra connection's handshake came back plain.
var errNotUpgraded = errors.New("client: extra connection not upgraded")

// DefaultConns is the default of WithConns.
const DefaultConns = 32

// smallConns caps the connections calls smaller than spreadBytes (request
// plus reply) spread over, whatever WithConns allows.
const smallConns = 4

// spreadBytes is the request+reply bytes in flight on a connection from
// which the next call goes to a less loaded one: one 128 KiB echo, eight
// 4 KiB ones.
const spreadBytes = 64 << 10

// spreadCalls is the calls in flight on a connection from which the next
// call goes to a less loaded one however small they are. One connection
// coalesces small calls best, but its server reads and answers them on one
// goroutine in bursts, and while it answers one burst the client has
// nothing else in flight: 64 callers of 64-byte echoes left a third of the
// two CPUs idle. Two connections of 32 let one burst be answered while the
// other is sent (atb-tcp, 2026-11-24, alternating: 266-273k calls/s
// against 243-244k; a threshold of 16 gave 268-278k at 64 B but nothing
// at 4 KiB, 32 did not hurt either). Eight callers never reach it.
const spreadCalls = 32

// spreadRetry is how long a Conn waits after a failed extra dial before it
// tries again (the server may be at its connection limit).
const spreadRetry = time.Second

// spreader is the Conn's set of extra connections.
type spreader struct {
	extra atomic.Pointer[[]*session] // copy-on-write; written under Conn.mu
	// Read without Conn.mu by every loaded call, so a failing server does
	// not serialise them on it; written under Conn.mu.
	dialing  atomic.Bool
	notAfter atomic.Int64 // unix ns: no extra dial before this (after a failure)
	// Guarded by Conn.mu.
	stop context.CancelFunc
	ctx  context.Context
	done chan struct{} // closed when a background dial ends; nil if none runs
}

// loaded reports whether s has enough calls or bytes in flight that the
// next call should look for another connection.
func (s *session) loaded() bool {
	n := s.inflight.Load()
	if n == 0 {
		return false
	}
	per := int64(s.reqSize.Load()) + int64(s.repSize.Load())
	return n >= spreadCalls || int64(n)*per >= spreadBytes
}

// pick returns the session a TCP call goes out on: s (the Conn's first
// connection) unless it is loaded and WithConns allows more.
func (c *Conn) pick(s *session) *session {
	if c.o.conns <= 1 || !s.hat || !s.loaded() {
		return s
	}
	limit := c.o.conns
	if int64(s.reqSize.Load())+int64(s.repSize.Load()) < spreadBytes {
		limit = min(limit, smallConns)
	}
	best := s
	least := s.inflight.Load()
	var extra []*session
	if p := c.spread.extra.Load(); p != nil {
		extra = *p
	}
	// Small calls stay on the first connections even when large ones
	// opened more.
	for _, e := range extra[:min(len(extra), limit-1)] {
		if n := e.inflight.Load(); n < least {
			best, least = e, n
		}
	}
	if len(extra)+1 < limit && (best == s || best.loaded()) {
		c.growSpread(limit)
	}
	// down, not usable: the flag mirrors what usable reads under the
	// session's mutex, which every call sent on an extra connection
	// took, from both CPUs, for a look that is stale once made anyway.
	if best != s && best.down.Load() {
		c.dropExtra(best)
		return s
	}
	return best
}

// growSpread starts dialling one more connection in the background unless
// one is being dialled, the Conn is closed, a recent dial failed or the
// Conn already has limit connections. The limit is checked again here,
// under c.mu: the caller's look at the connections may be stale (a dial
// that finished since), and calls under spreadBytes went past smallConns
// that way (5 of 4, seen under load on the rxe VM).
func (c *Conn) growSpread(limit int) {
	sp := &c.spread
	if sp.dialing.Load() || time.Now().UnixNano() < sp.notAfter.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || sp.dialing.Load() {
		return
	}
	if p := sp.extra.Load(); p != nil && len(*p)+1 >= min(limit, c.o.conns) {
		return
	}
	if sp.ctx == nil {
		sp.ctx, sp.stop = context.WithCancel(context.Background())
	}
	sp.dialing.Store(true)
	sp.done = make(chan struct{})
	go c.dialExtra(sp.ctx, sp.done)
}

func (c *Conn) dialExtra(ctx context.Context, done chan struct{}) {
	defer close(done)
	s, err := c.dialSessionCaps(ctx, offerHello, wire.CapFraming)
	if err == nil && !s.hat {
		// Not upgraded (e.g. the server is at its connection limit and
		// turned the handshake away): a plain connection must not carry
		// spread calls, see above.
		s.fail(&ConnError{Op: "close"})
		<-s.done
		s, err = nil, errNotUpgraded
	}
	c.mu.Lock()
	c.spread.dialing.Store(false)
	if err != nil {
		c.spread.notAfter.Store(time.Now().Add(spreadRetry).UnixNano())
		c.mu.Unlock()
		return
	}
	if c.closed {
		c.mu.Unlock()
		s.fail(&ConnError{Op: "close"})
		<-s.done
		return
	}
	var cur []*session
	if p := c.spread.extra.Load(); p != nil {
		cur = *p
	}
	next := append(append(make([]*session, 0, len(cur)+1), cur...), s)
	c.spread.extra.Store(&next)
	c.mu.Unlock()
}

// retireSpreadLocked takes the extra connections out of use when the
// first one broke or was told to go away and is dialled again (c.mu
// held): they went to the same server, and one whose reader has not yet
// seen that server go would still take calls, only to fail them (after a
// server restart, calls must succeed on fresh connections). Each closes
// once its calls are done; spreading dials new ones as load asks.
func (c *Conn) retireSpreadLocked() {
	p := c.spread.extra.Swap(nil)
	if p == nil {
		return
	}
	for _, e := range *p {
		c.old = append(c.old, e)
		e.drain()
		e.retired.Store(true)
		if e.inflight.Load() == 0 {
			e.fail(errRetired)
		}
	}
}

// closeIfRetired closes a retired extra connection whose last call just
// ended.
func (s *session) closeIfRetired(inflight int32) {
	if inflight == 0 && s.retired.Load() {
		s.fail(errRetired)
	}
}

var errRetired = &ConnError{Op: "close", Err: errors.New("extra connection retired with the first")}

// dropExtra forgets a broken or draining extra connection; its calls
// finish (or fail) on their own and Close still waits for its reader.
func (c *Conn) dropExtra(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.spread.extra.Load()
	if p == nil {
		return
	}
	next := make([]*session, 0, len(*p))
	for _, e := range *p {
		if e != s {
			next = append(next, e)
		}
	}
	if len(next) == len(*p) {
		return
	}
	c.spread.extra.Store(&next)
	c.old = append(c.old, s)
	c.reap()
}

// noteSize stores n in a size field shared by concurrent callers, only on
// change: a steady size then costs no cache-line write.
func noteSize(f *atomic.Int32, n int) {
	if v := int32(min(n, 1<<30)); f.Load() != v {
		f.Store(v)
	}
}

// closeSpread stops a dial in progress and returns the extra connections;
// c.mu is held and c.closed set. The caller fails them and waits.
func (c *Conn) closeSpreadLocked() (extra []*session, dialDone chan struct{}) {
	sp := &c.spread
	if sp.stop != nil {
		sp.stop()
	}
	if sp.dialing.Load() {
		dialDone = sp.done
	}
	if p := sp.extra.Swap(nil); p != nil {
		extra = *p
	}
	return extra, dialDone
}

// Conns reports how many TCP connections the Conn has open (at least 1
// while it is usable): the first one and those WithConns spread calls over.
func (c *Conn) Conns() int {
	n := 0
	if p := c.spread.extra.Load(); p != nil {
		n = len(*p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		n++
	}
	return n
}
