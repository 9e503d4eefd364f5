package wire

import (
	"net"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Stream frames (docs/design/streams.md) must reach the socket in the order
// their stream sent them, and a sender faster than the socket should have
// its frames coalesced: one write per message costs more than the message
// at 64 B. WriteStream does both. A frame is written at once by its sender
// when nothing is being written and the sender did not ask to batch; else
// it joins the posted queue, which the goroutine writing (a sender
// finishing its own write, or one WriteStream starts) drains with whatever
// else is queued, about maxBatch bytes of it per syscall. Memory is bounded by
// the stream credit windows (a sender posts only within them) and by
// maxPending.

// WriteStream writes one stream frame head with the values of refs
// inserted (see WriteVec), after every stream frame given before it.
//
// Without refs the frame is copied and WriteStream may return before it
// is written: head may be reused at once, and a failed write is reported
// to the OnAsyncError function and returned by every later write. burst
// says the caller has more frames coming (a stream sending without
// receiving): the frame is then queued even on an idle connection, for a
// goroutine of the Writer's own to write while the caller encodes the
// next one; without it an idle connection's frame is written by the
// caller, with no hand-off.
//
// With refs (or a frame of bigFrame bytes or more) it returns once the
// frame is written, as WriteVec: the values are written from the caller's
// memory.
func (w *Writer) WriteStream(head []byte, refs []proto.Ref, burst bool) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if len(refs) > 0 || len(head) >= bigFrame {
		// By reference, so after the stream frames posted so far.
		mark := w.postIn
		for w.postOut < mark && w.err == nil {
			w.idle.Wait()
		}
		w.mu.Unlock()
		return w.writeBig(head, refs)
	}
	if !w.writing && !burst {
		return w.writeLocked(head) // nothing posted is waiting when idle
	}
	return w.queueLocked(head, nil)
}

// queueLocked waits for room in the queue, queues head (copied into
// chunks, or with own, WriteStreamOwned's buffer, as it is) and starts
// the Writer's goroutine if it is not running (w.mu held; unlocks). On
// an error nothing is queued.
func (w *Writer) queueLocked(head []byte, own *[]byte) error {
	for w.writing && w.err == nil && w.postLen >= maxPending {
		w.idle.Wait()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if own == nil {
		w.post(head)
	} else {
		w.postIn += uint64(len(head))
		w.postLen += len(head)
		w.posted = append(w.posted, head)
		w.postOwn = append(w.postOwn, own)
	}
	if !w.writing {
		w.writing = true
		go w.flushPosted()
	}
	w.mu.Unlock()
	return nil
}

// WriteStreamOwned is WriteStream of the frame *bp, a buffer of the
// pool (GetBuf, GetBufSize) that the Writer now owns and returns to the
// pool once the frame is written: a frame that must be queued is queued
// in that buffer rather than copied into a chunk, so a sender encodes
// each message once (a 4 KiB message was encoded into its buffer and
// copied again into a chunk). Small frames, and buffers much larger than
// their frame (which would pin memory while queued), are copied as by
// WriteStream. The caller must not use *bp afterwards.
func (w *Writer) WriteStreamOwned(bp *[]byte, burst bool) error {
	head := *bp
	if len(head) < ownMin || cap(head) > 2*len(head) || len(head) >= bigFrame {
		err := w.WriteStream(head, nil, burst)
		PutBuf(bp)
		return err
	}
	w.mu.Lock()
	if w.err == nil && !w.writing && !burst {
		err := w.writeLocked(head) // unlocks; written, or copied into pending
		PutBuf(bp)
		return err
	}
	err := w.queueLocked(head, bp)
	if err != nil {
		PutBuf(bp) // not queued
	}
	return err
}

// ownMin is the frame size from which WriteStreamOwned queues the
// sender's buffer instead of copying it: below it a chunk holds many
// frames, and one writev piece per frame would cost more than the copy.
const ownMin = 2 << 10

// OnAsyncError sets f to be told when a frame WriteStream queued could
// not be written (its sender may have returned already). Set it before
// the first WriteStream.
func (w *Writer) OnAsyncError(f func(error)) {
	w.mu.Lock()
	w.onAsyncErr = f
	w.mu.Unlock()
}

// flushPosted is the write round WriteStream starts for frames posted on
// an idle connection.
func (w *Writer) flushPosted() {
	w.mu.Lock()
	f := w.onAsyncErr
	if err := w.finishLocked(nil, false); err != nil && f != nil {
		f(err)
	}
}

// postChunk is the size of the chunks posted frames are copied into. A
// write round takes whole chunks off the front of the queue while senders
// append at its end: one growing slice that rounds cut from the front
// was reallocated, and its whole backlog copied, every few rounds (at 4
// KiB messages, a third of the sender's CPU and 22 KB of garbage a
// message). Chunks come from, and go back to, the large-buffer pool.
const postChunk = 64 << 10

// post queues the bytes of b (w.mu held).
func (w *Writer) post(b []byte) {
	w.postIn += uint64(len(b))
	w.postLen += len(b)
	for len(b) > 0 {
		n := len(w.posted)
		if n == 0 || w.postOwn[n-1] != nil || len(w.posted[n-1]) == cap(w.posted[n-1]) {
			// A sender's own buffer (WriteStreamOwned) is never appended to.
			w.posted = append(w.posted, getLarge(postChunk))
			w.postOwn = append(w.postOwn, nil)
			n++
		}
		c := w.posted[n-1]
		k := min(len(b), cap(c)-len(c))
		w.posted[n-1] = append(c, b[:k]...)
		b = b[k:]
	}
}

// takePosted takes chunks off the front of the queue for one write round:
// up to max bytes of them, and at least one (w.mu held). The chunk at the
// tail, taken too, is no longer appended to: new frames start a new one.
func (w *Writer) takePosted(max int) net.Buffers {
	k, total := 0, 0
	for k < len(w.posted) && (k == 0 || total+len(w.posted[k]) <= max) {
		total += len(w.posted[k])
		k++
	}
	take := append(w.postTake[:0], w.posted[:k]...)
	w.ownTake = append(w.ownTake[:0], w.postOwn[:k]...)
	n := copy(w.posted, w.posted[k:])
	clear(w.posted[n:])
	w.posted = w.posted[:n]
	copy(w.postOwn, w.postOwn[k:])
	clear(w.postOwn[n:])
	w.postOwn = w.postOwn[:n]
	w.postLen -= total
	return take
}
