package server

// Reply memory.
//
// A client that pipelines calls and never reads their replies made the
// server hold every reply: 200 Scans of 6 MB each on one connection took
// 1.7 GB, held until the write timeout (issue 43). So before the reader
// hands on a call whose replies are large, it charges the reply the
// method is expected to send (twice its largest so far: the handler's
// result and the reply encoded from it are alive together) to the memory budget,
// next to the request memory: the call holds it until its reply is
// written (the request's r.mem, given back in clearRequest). A connection
// over its share stops being read, so its later calls wait (TCP pushes
// back on the client); calls of other connections go on. A reply that is
// never read keeps its write waiting until WithWriteTimeout closes the
// connection, which gives the memory back.
//
// The first calls of a method whose reply size is not known yet are
// charged a coldShare-th of the connection's share each, so a burst of
// them on a fresh server runs coldShare at a time per connection until
// one reply of the method told its size. (Charging the whole share would
// run them one at a time: a fast call would wait behind a slow one.) Replies under
// wire.ChargeMin are not charged (their memory is bounded by the call
// slots, as small requests are), so most calls take no lock here.

import "github.com/hatrpc/hatrpc/pkg/wire"

// coldShare: see above.
const coldShare = 4

// reserveReply charges the reply r is expected to send to the budget,
// waiting while the connection is over its share. It reports false when
// the connection ended while waiting.
func (c *conn) reserveReply(r *request) bool {
	b := &c.s.budget
	if b.total <= 0 || r.oneway || r.m == nil {
		return true
	}
	// The handler's result and its encoded reply are alive together.
	est := 2 * int64(r.m.repHint.Max())
	switch {
	case est == 0:
		est = b.perConn / coldShare // unknown: a few such calls at a time per connection
	case est < wire.ChargeMin:
		return true
	}
	// The request's own memory counts towards the share already.
	if est = min(est, b.perConn-r.mem); est <= 0 {
		return true
	}
	if c.holding.Load() {
		c.unhold() // waiting must not keep the replies of a burst back
	}
	if err := b.acquire(c, est, 0); err != nil {
		return false
	}
	r.mem += est
	return true
}

// hold charges n bytes that c holds already (a reply waiting for its
// turn), whether or not they fit: the memory exists, and the reader,
// which waits while c is over its share, is what stops more coming.
func (b *budget) hold(c *conn, n int64) {
	if n <= 0 || b.total <= 0 {
		return
	}
	b.mu.Lock()
	b.used += n
	c.memHeld += n
	b.mu.Unlock()
}
