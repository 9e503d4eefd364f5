package streamcore

import (
	"errors"
	"slices"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A stream on a lane (docs/design/streams.md, "Streams on lanes") has
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
type Outbox struct {
	mu     sync.Mutex
	buf    []byte
	off    int // buf[off:] is queued
	wake   chan struct{}
	closed bool
}

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
	if o.off > 0 && len(o.buf)+n > cap(o.buf) {
		// Room at the front, taken already: move the queue there rather
		// than grow.
		o.buf = o.buf[:copy(o.buf, o.buf[o.off:])]
		o.off = 0
	}
	prev := 0
	for _, r := range refs {
		o.buf = append(o.buf, head[prev:r.Off]...)
		o.buf = append(o.buf, r.Data...)
		prev = r.Off
	}
	o.buf = append(o.buf, head[prev:]...)
	o.mu.Unlock()
	wake(o.wake)
	return nil
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
	return len(o.buf) - o.off
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
// none.
func (o *Outbox) TakeLease(limit int, lease func(n int) []byte) []byte {
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
		return nil
	}
	dst := lease(n)
	if len(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	o.mu.Lock()
	if o.closed {
		// Closed meanwhile: what was queued is dropped, as by Close.
		o.mu.Unlock()
		return nil
	}
	// Only this taker removes frames, so the first n queued bytes are the
	// ones counted above, wherever a write moved them.
	copy(dst, o.buf[o.off:o.off+n])
	o.off += n
	if o.off == len(o.buf) {
		o.off = 0
		o.buf = o.buf[:0]
		if cap(o.buf) > outboxKeep {
			o.buf = nil
		}
	}
	o.mu.Unlock()
	return dst
}

// Close drops what is queued; later writes fail with ErrLaneGone.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.buf, o.off = nil, 0
	o.mu.Unlock()
	wake(o.wake)
}
