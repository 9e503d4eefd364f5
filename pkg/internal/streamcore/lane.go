package streamcore

import (
	"errors"
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
type Outbox struct {
	mu     sync.Mutex
	buf    []byte
	wake   chan struct{}
	closed bool
}

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
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrLaneGone
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

// Wake is signalled after a write.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Len is the bytes queued.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}

// Take appends to dst the queued frames, whole, as many as fit in limit
// bytes (at least one), and keeps the rest queued.
func (o *Outbox) Take(dst []byte, limit int) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for n < len(o.buf) {
		h, err := wire.DecodeHeader(o.buf[n:], len(o.buf))
		end := n + wire.HeaderSize + h.PayloadLen()
		if err != nil || end > len(o.buf) {
			end = len(o.buf) // cannot happen: only whole frames are written
		}
		if n > 0 && end > limit {
			break
		}
		n = end
	}
	dst = append(dst, o.buf[:n]...)
	rest := copy(o.buf, o.buf[n:])
	o.buf = o.buf[:rest]
	if rest == 0 && cap(o.buf) > 1<<20 {
		o.buf = nil // a burst of large messages does not stay pinned
	}
	return dst
}

// Close drops what is queued; later writes fail with ErrLaneGone.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.buf = nil
	o.mu.Unlock()
	wake(o.wake)
}
