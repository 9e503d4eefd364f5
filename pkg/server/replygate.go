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
// The first calls of a method whose reply size is not known yet are not
// charged (a guess would refuse small calls on a busy budget), but at
// most coldMax of them run at a time per connection, until one reply of
// the method told its size. Replies under wire.ChargeMin are not charged
// (their memory is bounded by the call slots, as small requests are), so
// most calls take no lock here.

import (
	"errors"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// coldMax: see above.
const coldMax = 4

// replyGate is a connection's state for its calls' reply memory.
type replyGate struct {
	cold chan struct{} // a place per cold call running; made by the reader
}

// reserveReply charges the reply r is expected to send to the budget,
// waiting while the connection is over its share (with WithBusyTimeout at
// most that long, then r is answered "server busy"). It reports false
// when r is not to run: answered busy, or the connection ended.
func (c *conn) reserveReply(r *request) bool {
	b := &c.s.budget
	if b.total <= 0 || r.oneway || r.m == nil {
		return true
	}
	// The handler's result and its encoded reply are alive together.
	est := 2 * int64(r.m.repHint.Max())
	switch {
	case est == 0:
		return c.takeCold(r)
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
	if err := b.acquire(c, est, c.s.opts.busyTimeout); err != nil {
		c.replyBusy(r, err)
		return false
	}
	r.mem += est
	return true
}

// takeCold takes a place for a call whose method's reply size is not
// known yet, waiting (with WithBusyTimeout at most that long) while coldMax
// run on the connection.
func (c *conn) takeCold(r *request) bool {
	if c.rg.cold == nil {
		c.rg.cold = make(chan struct{}, coldMax)
	}
	select {
	case c.rg.cold <- struct{}{}:
		r.cold = true
		return true
	default:
	}
	var timer <-chan time.Time
	if d := c.s.opts.busyTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	if c.holding.Load() {
		c.unhold()
	}
	select {
	case c.rg.cold <- struct{}{}:
		r.cold = true
		return true
	case <-timer:
		c.replyBusy(r, errBudgetWait)
	case <-c.ctx.Done():
	}
	return false
}

// dropCold gives back r's place as a cold call.
func (c *conn) dropCold(r *request) {
	if r.cold {
		<-c.rg.cold
	}
}

// replyBusy answers r "server busy" after it waited WithBusyTimeout for
// memory (err), as a request that waited for memory is.
func (c *conn) replyBusy(r *request, err error) {
	if !errors.Is(err, errBudgetWait) || c.ctx.Err() != nil || r.oneway {
		return
	}
	c.s.met.rejected.WithLabelValues("memory_budget").Inc()
	c.replyHinted(&r.replyTo, proto.Exception,
		proto.NewApplicationException(proto.ExcInternalError, errBudgetWait.Error()), nil, nil, c.busyMD(r))
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
