package streamcore

import (
	"errors"
	"runtime"
	"slices"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A stream on a lane (docs/design/streams-lanes.md) has
// no byte stream to write its frames to: a lane is one request and one
// reply at a time, started by the client. Each side queues its frames in
// an Outbox, and the lane's exchanges carry them: the client's in its
// requests, the server's in its replies.

// ErrLaneGone: the lane that carried the stream ended or moved on.
var ErrLaneGone = errors.New("stream: the lane carrying the stream is gone")

// Outbox holds the frames one side of a lane stream has written and the
// lane has not carried yet. Frames are written whole and taken whole.
//
// The queue is one buffer read from off: a take moves off rather than
// the rest of the queue, and the buffer is kept for the next burst (up to
// outboxKeep), so a bulk stream neither copies what it queued twice nor
// allocates (and faults in) a fresh buffer per exchange.
//
// A taker waiting for frames may lend the outbox the memory its reply
// will be sent from (Lend: a lane's registered buffer, while a poll is
// held): frames written while nothing else is queued and the lease has
// room are copied straight into it, and Reclaim hands them back as the
// reply, so a message the handler sends to a waiting client is copied
// once by the writer instead of into the queue and again into the lease.
type Outbox struct {
	mu     sync.Mutex
	buf    []byte
	off    int // buf[off:] is queued
	wake   chan struct{}
	closed bool
	// lease[:leased] holds frames written into the lent memory (all of
	// them queued before buf's: frames go there only while buf is empty).
	lease  []byte
	leased int
	// handedOff: a writer yielded for this lease's frames (HandOff).
	handedOff bool
}

// HandOff is how much of a lent lease a writer fills before it yields
// its processor (runtime.Gosched), once a lease. The write wakes the
// lane's goroutine, and Go queues a woken goroutine to run next on the
// waker's processor, not on an idle one: traced on a 64 KiB server
// stream over shm lanes, the lane's goroutine sat runnable for the 85 us
// the handler took to fill the whole 1 MiB window, so the lane sent a
// reply only once the handler blocked on credit, and the fill and the
// send of every reply took turns on one core with the other idle. Yielded
// at the bulk sender's in-flight target (BulkInFlight, half the default
// window), the lane sends what is filled while the handler, taken up by
// the idle processor, fills the next lease with the rest of its credit.
const HandOff = BulkInFlight

// handOff yields the processor at a lease's HandOff (a variable so that a
// test sees each yield and where in the lease it came, which the
// scheduler's choice of what runs next would not show reliably).
var handOff = runtime.Gosched

// outboxKeep bounds the buffer an empty outbox keeps: a window's burst
// (the default byte window, with its frames' headers) stays, an odd huge
// message's buffer does not stay pinned.
const outboxKeep = 4 << 20

// NewOutbox returns an empty outbox.
func NewOutbox() *Outbox { return &Outbox{wake: make(chan struct{}, 1)} }

// Write queues a frame.
func (o *Outbox) Write(b []byte) error { return o.WriteVec(b, nil) }

// WriteStream is WriteVec: the lane's exchanges take whatever the outbox
// holds at once, so a burst needs nothing more (the TCP writer's
// WriteStream batches).
func (o *Outbox) WriteStream(head []byte, refs []proto.Ref, _ bool) error {
	return o.WriteVec(head, refs)
}

// WriteVec queues the frame head with the values of refs inserted (see
// proto.Ref): they are copied, so the caller may reuse them at once, as
// after a connection's WriteVec.
func (o *Outbox) WriteVec(head []byte, refs []proto.Ref) error {
	n := len(head)
	for _, r := range refs {
		n += len(r.Data)
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrLaneGone
	}
	if o.lease != nil && o.off == len(o.buf) && o.leased+n <= len(o.lease) {
		// Straight into the lent reply memory: nothing is queued before it.
		o.leased += len(appendVec(o.lease[o.leased:o.leased], head, refs))
		yield := !o.handedOff && o.leased >= HandOff
		o.handedOff = o.handedOff || yield
		o.mu.Unlock()
		wake(o.wake)
		if yield {
			handOff()
		}
		return nil
	}
	if o.off > 0 && len(o.buf)+n > cap(o.buf) {
		// Room at the front, taken already: move the queue there rather
		// than grow.
		o.buf = o.buf[:copy(o.buf, o.buf[o.off:])]
		o.off = 0
	}
	o.buf = appendVec(o.buf, head, refs)
	o.mu.Unlock()
	wake(o.wake)
	return nil
}

// appendVec appends head with the values of refs inserted to dst (in
// place when dst has room for them: a lease is only written when the
// frame fits).
func appendVec(dst, head []byte, refs []proto.Ref) []byte {
	prev := 0
	for _, r := range refs {
		dst = append(dst, head[prev:r.Off]...)
		dst = append(dst, r.Data...)
		prev = r.Off
	}
	return append(dst, head[prev:]...)
}

// Kick signals Wake without a write: the stream's state changed in a
// way a taker waiting for frames must look at (it ended with nothing to
// send).
func (o *Outbox) Kick() { wake(o.wake) }

// Wake is signalled after a write.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Len is the bytes queued.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf) - o.off + o.leased
}

// Lend offers the outbox lease, the memory the caller's next reply will
// be sent from, for frames written until Reclaim: only when nothing is
// queued (the frames keep their order) and the outbox is open. It
// reports whether the outbox took it. The caller must not touch lease
// until Reclaim.
func (o *Outbox) Lend(lease []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.lease != nil || o.off != len(o.buf) || len(lease) == 0 {
		return false
	}
	o.lease, o.leased, o.handedOff = lease, 0, false
	return true
}

// Reclaim takes the lease back, with the frames written into it: nil when
// none was, or none is lent. Frames that did not fit in it stay queued
// for the next take.
func (o *Outbox) Reclaim() []byte {
	b, _ := o.ReclaimLend(nil)
	return b
}

// ReclaimLend is Reclaim, and lends next in the same step when frames came
// back and nothing is queued (as Lend would): a writer going on meanwhile
// writes into next, not into the queue, where the frames it wrote between a
// Reclaim and a Lend would have kept the next lease from being taken. Not
// when no frame came back: the caller then takes the queue into memory of
// its own, which next may be. It reports whether next is lent.
func (o *Outbox) ReclaimLend(next []byte) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.lease[:o.leased]
	o.lease, o.leased = nil, 0
	if len(b) == 0 || o.closed {
		return nil, false
	}
	if len(next) > 0 && o.off == len(o.buf) {
		o.lease, o.handedOff = next, false
		return b, true
	}
	return b, false
}

// Take appends to dst the queued frames, whole, as many as fit in limit
// bytes (at least one), and keeps the rest queued.
func (o *Outbox) Take(dst []byte, limit int) []byte {
	start := len(dst)
	got := o.TakeLease(limit, func(n int) []byte {
		dst = slices.Grow(dst, n)
		return dst[start : start+n]
	})
	return dst[:start+len(got)]
}

// TakeLease takes the queued frames, whole, as many as fit in limit bytes
// (at least one), into lease(n), n their size: a lane's registered buffer
// (rdma.RPCEndpoint.ReplyBuffer), so the engine sends them without another
// copy. lease is called without the outbox locked (writers go on
// meanwhile: they only append). A lease shorter than n (nil: none) takes
// them into a fresh buffer instead. It returns the frames taken, nil for
// none. Not while a lease is lent (Lend): Reclaim first.
func (o *Outbox) TakeLease(limit int, lease func(n int) []byte) []byte {
	b, _ := o.TakeLeaseLend(limit, lease, nil)
	return b
}

// TakeLeaseLend is TakeLease, and lends the outbox next(dst) (nil: none),
// dst the memory the frames were taken into, in the same step when the
// take left nothing queued (as Lend would): a writer going on meanwhile
// writes into the lease rather than the queue, where the frames it wrote
// between a take and a Lend would have kept the lease from being taken,
// and every reply after from being written in place. next is called
// without the outbox locked. It reports whether the lease is lent.
func (o *Outbox) TakeLeaseLend(limit int, lease func(n int) []byte, next func(dst []byte) []byte) ([]byte, bool) {
	o.mu.Lock()
	q := o.buf[o.off:]
	n := 0
	for n < len(q) {
		h, err := wire.DecodeHeader(q[n:], len(q))
		end := n + wire.HeaderSize + h.PayloadLen()
		if err != nil || end > len(q) {
			end = len(q) // cannot happen: only whole frames are written
		}
		if n > 0 && end > limit {
			break
		}
		n = end
	}
	o.mu.Unlock()
	if n == 0 {
		return nil, false
	}
	dst := lease(n)
	if len(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	var nl []byte
	if next != nil {
		nl = next(dst)
	}
	o.mu.Lock()
	if o.closed {
		// Closed meanwhile: what was queued is dropped, as by Close.
		o.mu.Unlock()
		return nil, false
	}
	// Only this taker removes frames, so the first n queued bytes are the
	// ones counted above, wherever a write moved them.
	copy(dst, o.buf[o.off:o.off+n])
	o.off += n
	lent := false
	if o.off == len(o.buf) {
		o.off = 0
		o.buf = o.buf[:0]
		if cap(o.buf) > outboxKeep {
			o.buf = nil
		}
		if len(nl) > 0 && o.lease == nil {
			o.lease, o.leased, o.handedOff, lent = nl, 0, false, true
		}
	}
	o.mu.Unlock()
	return dst, lent
}

// Close drops what is queued; later writes fail with ErrLaneGone.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.buf, o.off = nil, 0
	o.lease, o.leased = nil, 0
	o.mu.Unlock()
	wake(o.wake)
}

// Loan counts the received messages of a lane stream that are read in
// place in the lane's reply (the engine's registered memory) instead of
// being copied out of it: with borrow_msgs a server stream's client
// decodes each large message there, and its binary values alias that
// memory until the caller's next RecvMsg. The reply is valid only until
// the lane's next exchange, and closing the lane unmaps it, so the lane's
// runner starts no exchange while any is out (Wake), and a lane given up
// meanwhile (the stream canceled) is closed only once all are back
// (Finally): a caller still reading its last message reads mapped memory.
type Loan struct {
	mu   sync.Mutex
	out  int
	then func()
	wake chan struct{}
	// hushed: Return signals no Wake (Hush).
	hushed bool
}

// NewLoan returns a loan with nothing out.
func NewLoan() *Loan { return &Loan{wake: make(chan struct{}, 1)} }

// Lend counts one message more out; call it before the message can be
// received.
func (l *Loan) Lend() {
	l.mu.Lock()
	l.out++
	l.mu.Unlock()
}

// Return counts one message back; the last one back signals Wake and
// runs what Finally left.
func (l *Loan) Return() { l.back(1) }

// Abandon counts every message back: their receiver is gone (its
// stream unreachable), so nothing can read them any more.
func (l *Loan) Abandon() { l.back(-1) }

func (l *Loan) back(n int) {
	l.mu.Lock()
	signal := n < 0 || !l.hushed
	if n < 0 || n > l.out {
		n = l.out
	}
	l.out -= n
	zero := l.out == 0
	var f func()
	if zero {
		f, l.then = l.then, nil
	}
	l.mu.Unlock()
	if zero && signal {
		wake(l.wake)
	}
	if f != nil {
		f()
	}
}

// Out is the messages out.
func (l *Loan) Out() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out
}

// Wake is signalled when the last message out comes back (but for a
// Return while hushed).
func (l *Loan) Wake() <-chan struct{} { return l.wake }

// Hush stops (true) or restarts Return signalling Wake: a lane runner
// that has offered its next exchange to the caller who returns the
// messages is not woken by their return (a thread woken per exchange
// for nothing). Abandon still signals.
func (l *Loan) Hush(h bool) {
	l.mu.Lock()
	l.hushed = h
	l.mu.Unlock()
}

// Finally runs f once no message is out: now, or when the last comes
// back (on that goroutine).
func (l *Loan) Finally(f func()) {
	l.mu.Lock()
	if l.out > 0 {
		l.then = f
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f()
}
