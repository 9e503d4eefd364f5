package server

// Reply memory.
//
// A client that pipelines calls and never reads their replies made the
// server hold every reply: 200 Scans of 6 MB each on one connection took
// 1.7 GB, held until the write timeout (issue 43). So every reply a TCP
// connection is sent, small ones included, is charged to the memory
// budget, next to the request memory, from the moment it is built until
// it is written, and a connection never holds more than its share:
//
//   - Before the reader hands on a call, it reserves the reply the
//     method is expected to send (twice its estimate: its largest
//     reply so far, decaying over the smaller ones after it, see
//     wire.SizeHint; the handler's result and the reply encoded from
//     it are alive together), added to what the request holds (the
//     call's mem). A connection over its share stops being read, so
//     its later calls wait (TCP pushes back on the client); other
//     connections go on.
//   - Once built, the reply is admitted by its size, in exchange for
//     what its call held. One that does not fit waits, unsent and
//     holding nothing of the budget (so replies waiting cannot hold the
//     room each needs), while the connection's earlier replies drain;
//     the reader reads nothing meanwhile. A plain connection's replies
//     are admitted in their order (a later reply admitted first would
//     hold room the earlier one needs, and could not be written before
//     it). A reply that waits longer than WithWriteTimeout closes the
//     connection, as a write blocked that long does, which gives
//     everything back.
//   - A reply larger than the share is refused (the call gets an
//     exception naming size and share), as a request larger than the
//     share is.
//
// The first calls of a method whose reply size is not known yet reserve
// nothing (a guess would refuse small calls on a busy budget), so at
// most coldMax of them start in the whole server until one reply of the
// method told its size. (Counted per connection, 64 Thrift-over-HTTP
// requests for Scan(10,000) sent at once to a fresh hatkv ran all 64
// handlers uncharged: +0.8-1.0 GB against a 256 MiB budget.) A cold
// call holds its place for coldLease at most: a method whose calls wait
// (a long poll, a watch) has sent no reply yet when its fifth caller
// comes, and with places held until the calls ended, that caller waited
// for one of the first four to end (test/fault TestServerStoppedMidCall).
// A call still running after coldLease is a long one rather than one
// building a reply; the next cold call starts then. So what the server
// holds beyond the budget is at most the replies built and waiting for
// admission: coldMax cold ones per method and lease, or ones larger than
// their method's estimate. Those stop their reader until they are
// admitted (and are not built past the share: reply.go), but the
// handlers that build them run
// uncharged: after one Scan(1), 64 connections each sending one
// Scan(10,000) grew hatkv by +0.4-0.5 GB. A handler whose reply may be
// far larger than its method's earlier ones reserves as it builds
// (ReserveReply, replyroom.go) and cuts its answer where the room ends.
//
// Thrift over HTTP sends a request's replies in one response once all
// its calls ended: they stay charged until that response is written
// (within WithWriteTimeout), its calls reserve only the room its
// replies left, and replies outgrowing the share fail the request with
// a 500 instead of waiting for room that cannot come (http.go).
//
// A dedicated lane's replies and batches are charged by lanereply.go
// (admitReply for a single reply), to the lane connection's share, the
// fast path's connections holding at most a quarter of the budget
// together (WithFastPathShare); a FLOCK call's reservation (ReserveReply)
// is held until its call ends, its reply until FLOCK posted it.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// coldMax and coldLease: see above.
const (
	coldMax   = 4
	coldLease = time.Second
)

// replyGate is a connection's state for its calls' reply memory.
type replyGate struct {
	// guarded by budget.mu:
	waiting   int    // built replies waiting for admission
	admitNext uint64 // a plain connection's next reply (by order) to admit
}

// errReplyWait closes a connection whose reply waited WithWriteTimeout
// for memory.
var errReplyWait = errors.New("server: a reply waited for the connection's memory share for the write timeout")

// reserveReply charges the reply r is expected to send to the budget,
// waiting while the connection is over its share or has replies waiting
// for admission (with WithBusyTimeout at most that long, then r is
// answered "server busy"). It reports false when r is not to run:
// answered busy, or the connection ended.
func (c *conn) reserveReply(r *request) bool {
	b := &c.s.budget
	if b.total <= 0 || r.oneway || r.m == nil {
		return true
	}
	// The handler's result and its encoded reply are alive together.
	est := 2 * int64(r.m.repHint.Max())
	var owed int64 // request memory given back while waiting for a cold place
	if est == 0 {
		r.at = 0 // it may wait for a place: its time starts once it runs
		var ok bool
		if owed, ok = c.takeCold(r); !ok {
			return false
		}
		// A reply sent while r waited told the size after all.
		if est = 2 * int64(r.m.repHint.Max()); est > 0 {
			c.dropCold(r)
		}
	}
	// The request's own memory counts towards the share already.
	est = max(min(est, b.perConn-r.mem-owed), 0) + owed
	if b.tryReserve(c, &r.mem, est) {
		return true
	}
	r.at = 0 // it may wait: its time starts once it runs
	if err := b.reserve(c, &r.mem, est, c.s.opts.busyTimeout); err != nil {
		c.replyBusy(r, err)
		return false
	}
	return true
}

// reserve adds n bytes to what a call of c holds (*held), waiting while
// they do not fit or replies of c wait for admission (at most wait, if
// > 0). While it waits, the call holds nothing: admitting the waiting
// replies may need the room its request holds.
func (b *budget) reserve(c *conn, held *int64, n int64, wait time.Duration) error {
	// An HTTP request's replies drain only when its response is sent,
	// after all its calls: a reservation waiting for the share they hold
	// would wait forever. Its calls reserve what room is left; admitting
	// a reply that does not fit fails the request (admitReply).
	http := c.overHTTP()
	b.mu.Lock()
	if http {
		n = max(min(n, b.perConn-c.memHeld), 0)
	}
	if c.rg.waiting == 0 && (n == 0 || b.fits(c, n)) {
		b.take(c, n)
		*held += n
		b.mu.Unlock()
		return nil
	}
	giveBack := b.freeLocked(c, *held)
	n += *held
	*held = 0
	b.mu.Unlock()
	if giveBack {
		b.giveBack()
	}
	if c.holding.Load() {
		c.unhold() // waiting must not keep the replies of a burst back
	}
	var timer <-chan time.Time
	for {
		b.mu.Lock()
		if http {
			n = max(min(n, b.perConn-c.memHeld), 0)
		}
		if c.rg.waiting == 0 && (n == 0 || b.fits(c, n)) {
			b.take(c, n)
			*held = n
			b.mu.Unlock()
			return nil
		}
		if err := b.wait(c, &timer, wait); err != nil {
			return err
		}
	}
}

// tryReserve is reserve when n fits at once: it reports false, holding
// what it held, when reserve would wait.
func (b *budget) tryReserve(c *conn, held *int64, n int64) bool {
	http := c.overHTTP()
	b.mu.Lock()
	if http {
		n = max(min(n, b.perConn-c.memHeld), 0) // see reserve
	}
	if c.rg.waiting == 0 && (n == 0 || b.fits(c, n)) {
		b.take(c, n)
		*held += n
		b.mu.Unlock()
		return true
	}
	b.mu.Unlock()
	return false
}

// admitReply exchanges what the call answered by to holds (to.mem: its
// request and its reply's reservation) for its built reply of n bytes,
// waiting, holding nothing, while the reply does not fit c's share (see
// above). It reports false when the reply is not to be sent: the
// connection ended, or the reply waited WithWriteTimeout (the connection
// is closed then). The caller gives n back once the reply is written.
func (c *conn) admitReply(to *replyTo, n int64) bool {
	b := &c.s.budget
	if b.total <= 0 {
		return true
	}
	ordered := !to.hat
	http := c.overHTTP() // plain, so ordered
	b.mu.Lock()
	turn := c.rg.waiting == 0 // HatRPC replies: no one waits ahead
	if ordered {
		turn = to.order == c.rg.admitNext
	}
	if d := n - to.mem; turn && (d <= 0 || b.fits(c, d)) {
		// The request was decoded (its buffer is back in the pool, or
		// sent by reference within the n bytes) and the reservation is
		// spent: the reply's bytes are what the call holds now.
		b.take(c, d)
		to.mem = 0
		if ordered {
			c.rg.admitNext++
		}
		if d < 0 || ordered {
			b.wakeLocked()
		}
		b.mu.Unlock()
		return true
	}
	giveBack := b.freeLocked(c, to.mem)
	to.mem = 0
	c.rg.waiting++
	b.mu.Unlock()
	if giveBack {
		b.giveBack()
	}
	c.unhold() // what a burst's Hold queued may be what is to drain
	var timer <-chan time.Time
	for {
		b.mu.Lock()
		// A reply larger than the share by its framing (a larger
		// message is refused) waits for the connection to hold nothing
		// else.
		room := b.fits(c, n) || c.memHeld == 0 && n > b.perConn && b.used+n <= b.total
		if room && (!ordered || to.order == c.rg.admitNext) {
			b.take(c, n)
			c.rg.waiting--
			if ordered {
				c.rg.admitNext++
			}
			b.wakeLocked()
			b.mu.Unlock()
			return true
		}
		// An HTTP request's replies drain only when its response is
		// sent, after all its calls, and the calls behind this reply
		// wait for it: in its turn, what its connection holds is all
		// that it will hold, and a reply that does not fit the share
		// besides would wait forever.
		if http && to.order == c.rg.admitNext && c.memHeld+n > b.perConn {
			c.rg.waiting--
			b.wakeLocked()
			b.mu.Unlock()
			c.httpOverShare()
			return false
		}
		if err := b.wait(c, &timer, c.s.opts.writeTimeout); err != nil {
			b.mu.Lock()
			c.rg.waiting--
			b.wakeLocked()
			b.mu.Unlock()
			if errors.Is(err, errBudgetWait) {
				c.checkWrite(errReplyWait)
			}
			return false
		}
	}
}

// overShare reports whether a reply of size bytes can never fit c's
// share of the memory budget.
func (c *conn) overShare(size int) bool {
	b := &c.s.budget
	return b.total > 0 && int64(size) > b.shareOf(c)
}

// shareOf is the most c may ever hold of the budget.
func (b *budget) shareOf(c *conn) int64 {
	if c.fastPath.Load() {
		return min(b.perConn, b.fastMax)
	}
	return min(b.perConn, b.total)
}

// replyOverShare is the exception a call whose reply of size bytes
// (more: of more than size) exceeds the connection's share gets.
func (c *conn) replyOverShare(size int, more bool) *proto.ApplicationException {
	c.s.met.rejected.WithLabelValues("reply_too_large").Inc()
	return proto.NewApplicationException(proto.ExcInternalError,
		fmt.Sprintf("hatrpc: reply of %s exceeds the connection's memory share of %d bytes (WithMemoryBudget)",
			sizeText(size, more), c.s.budget.shareOf(c)))
}

// coldPlace is a cold call's place among its method's coldMax: given
// back when the call ends or after the server's cold lease, whichever
// comes first.
type coldPlace struct {
	places chan struct{}
	held   atomic.Bool
	lease  *time.Timer
}

func (p *coldPlace) drop() {
	if p.held.CompareAndSwap(true, false) {
		<-p.places
	}
}

// takeCold takes a place for a call whose method's reply size is not
// known yet, waiting (with WithBusyTimeout at most that long) while
// coldMax of the method's calls hold one. While it waits, the call holds
// nothing of the budget (the cold calls' replies may need the room its
// request holds): it returns what r held then, for the caller to take
// again.
func (c *conn) takeCold(r *request) (owed int64, ok bool) {
	select {
	case r.m.cold <- struct{}{}:
		c.holdCold(r)
		return 0, true
	default:
	}
	owed = r.mem
	c.s.budget.release(c, owed)
	r.mem = 0
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
	case r.m.cold <- struct{}{}:
		c.holdCold(r)
		return owed, true
	case <-timer:
		c.replyBusy(r, errBudgetWait)
	case <-c.ctx.Done():
	}
	return 0, false
}

// holdCold records the place r took, to be given back after the lease.
func (c *conn) holdCold(r *request) {
	p := &coldPlace{places: r.m.cold}
	p.held.Store(true)
	p.lease = time.AfterFunc(c.s.coldLease, p.drop)
	r.cold = p
}

// dropCold gives back r's place as a cold call, if it still holds one.
func (c *conn) dropCold(r *request) {
	if p := r.cold; p != nil {
		p.lease.Stop()
		p.drop()
		r.cold = nil
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
