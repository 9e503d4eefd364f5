package wire

import (
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Writer serialises writes from many goroutines onto one stream and
// coalesces them: while one goroutine is inside the write syscall, others
// append to a pending buffer that the same goroutine flushes next, in a
// single syscall. No dedicated writer goroutine means no extra hop on the
// latency path when there is no contention.
type Writer struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	spare   []byte
	// Big frames queued by reference while another goroutine writes (see
	// writeBig): vecTaken counts the batches taken for writing, vecSent
	// those written; a frame queued while vecTaken was k is sent once
	// vecSent > k.
	vec      net.Buffers
	vecSpare net.Buffers
	vecTaken uint64
	vecSent  uint64
	writing  bool
	err      error
	onWrite  func(n int) // bytes-out accounting; may be nil
	idle     sync.Cond   // signalled when a flush round ends
	busy     int         // > 0: recent flushes found queued frames
	held     int         // > 0: see Hold

	// Stream frames queued in order (writepost.go): posted holds their
	// bytes in chunks of postChunk (postLen in all), postIn and postOut
	// count the bytes ever queued and written; postTake is the writing
	// goroutine's scratch list of the chunks it took.
	posted     [][]byte
	postOwn    []*[]byte // aligned with posted: a sender's own buffer (WriteStreamOwned), nil for a chunk
	postLen    int
	postTake   net.Buffers
	ownTake    []*[]byte // postOwn of the chunks in postTake
	postIn     uint64
	postOut    uint64
	iov        net.Buffers // the writing goroutine's scratch vector
	onAsyncErr func(error) // told a posted frame's write failed; may be nil

	deadline interface{ SetWriteDeadline(time.Time) error }
	timeout  time.Duration
	dlSet    time.Time // the write deadline last set; owned by the writing goroutine
}

// NewWriter wraps w; onWrite (optional) is told every successful write size.
func NewWriter(w io.Writer, onWrite func(n int)) *Writer {
	wr := &Writer{w: w, onWrite: onWrite}
	wr.idle.L = &wr.mu
	return wr
}

// Write queues p, or writes it directly when the stream is idle. It returns
// the stream's sticky error. p may be reused as soon as Write returns.
func (w *Writer) Write(p []byte) error {
	if len(p) >= bigFrame {
		// Copying a big frame would cost more than the syscall it might
		// save: it is written from p, after the frames queued before it.
		return w.writeBig(p, nil)
	}
	w.mu.Lock()
	return w.writeLocked(p)
}

// writeLocked is Write with w.mu held (len(p) < bigFrame); it unlocks.
func (w *Writer) writeLocked(p []byte) error {
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	// A peer that stops reading must not make us buffer without bound:
	// past maxPending, writers wait for the flusher (TCP backpressure).
	for w.writing && w.err == nil && len(w.pending) >= maxPending {
		w.idle.Wait()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.writing || w.held > 0 && len(w.pending)+len(p) <= maxHeld {
		w.pending = append(w.pending, p...)
		w.mu.Unlock()
		return nil
	}
	w.writing = true
	var err error
	own := 0 // bytes of ours in pending (empty while nobody writes or holds)
	if w.busy > 0 || len(w.pending) > 0 {
		// Frames a Hold left queued go first. Writers queued behind the
		// last flush: yield once so the goroutines about to write
		// (replies being encoded, callers being woken) join this syscall
		// instead of each paying for one.
		w.pending = append(w.pending, p...)
		own = len(p)
		if w.busy > 0 {
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
		}
	} else {
		w.mu.Unlock()
		err = w.write(p)
		w.mu.Lock()
	}
	return w.finishLocked(err, len(w.pending) > own)
}

// WriteVec writes head with the values of refs inserted (see proto.Ref) as
// one frame, with a vectored write (writev) when the stream supports it, so
// the values go to the socket from their own memory instead of being copied
// into the frame first. It returns once the frame is written: head and the
// values may be reused then.
func (w *Writer) WriteVec(head []byte, refs []proto.Ref) error {
	if len(refs) == 0 {
		return w.Write(head)
	}
	return w.writeBig(head, refs)
}

// writeBig writes the frame head+refs without copying it. While another
// goroutine writes, the frame joins the queue of big frames, which that
// goroutine sends in one vectored write after its own; their callers then
// wake once each, instead of every waiter waking at every write to race
// for the next turn.
func (w *Writer) writeBig(head []byte, refs []proto.Ref) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.writing {
		w.vec = appendFrame(w.vec, head, refs)
		batch := w.vecTaken
		for w.vecSent <= batch && w.err == nil {
			w.idle.Wait()
		}
		err := w.err
		if w.vecSent > batch {
			err = nil
		}
		w.mu.Unlock()
		return err
	}
	w.writing = true
	w.vec = appendFrame(w.vec, head, refs)
	return w.finishLocked(nil, false)
}

// appendFrame appends the pieces of the frame head+refs to bufs.
func appendFrame(bufs net.Buffers, head []byte, refs []proto.Ref) net.Buffers {
	prev := 0
	for _, r := range refs {
		if r.Off > prev {
			bufs = append(bufs, head[prev:r.Off])
		}
		bufs = append(bufs, r.Data)
		prev = r.Off
	}
	if prev < len(head) {
		bufs = append(bufs, head[prev:])
	}
	return bufs
}

// finishLocked ends a write round begun by setting w.writing: it flushes
// what was queued meanwhile (queued tells whether anyone else's frames
// were) and unlocks w.mu.
func (w *Writer) finishLocked(err error, queued bool) error {
	if err == nil {
		err = w.flushPendingLocked()
	}
	if err != nil && w.err == nil {
		w.err = err
		w.pending = nil
		clear(w.vec)
		w.vec = nil
		w.posted, w.postOwn, w.postLen = nil, nil, 0
	}
	// Contention comes in bursts: keep yielding for a few rounds after the
	// last one that batched anything, then go back to writing directly.
	if queued {
		w.busy = busyRounds
	} else if w.busy > 0 {
		w.busy--
	}
	w.writing = false
	err = w.err
	w.idle.Broadcast()
	w.mu.Unlock()
	return err
}

// Hold makes small frames queue until the matching Release instead of
// being written: a server running a burst of pipelined calls back to back
// sends their replies in one syscall instead of one each. Up to maxHeld
// bytes are held; beyond that frames go out as usual.
func (w *Writer) Hold() {
	w.mu.Lock()
	w.held++
	w.mu.Unlock()
}

// Release ends a Hold, writing what it queued once no Hold is left.
func (w *Writer) Release() error {
	w.mu.Lock()
	w.held--
	if w.held > 0 || w.writing || len(w.pending) == 0 || w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.writing = true
	return w.finishLocked(nil, false)
}

// bigFrame is the size from which frames bypass the coalescing buffer
// (they are written from the caller's memory, see writeBig); maxPending
// bounds that buffer.
const (
	bigFrame   = 64 << 10
	maxPending = 4 << 20
	busyRounds = 16
	maxHeld    = 64 << 10
	// maxBatch caps the posted stream bytes one write round takes, so a
	// unary frame written meanwhile waits behind at most this much.
	maxBatch = 128 << 10
)

// flushPendingLocked writes queued frames until none are left: the small
// ones copied into pending, then up to maxBatch bytes of posted stream
// frames, then the big ones queued by reference, in one vectored write per
// round. Frames written with Write go first in a round, so a unary call
// waits behind at most one batch of stream data. w.mu is held on entry
// and exit but not during the syscalls.
func (w *Writer) flushPendingLocked() error {
	for len(w.pending) > 0 || len(w.vec) > 0 || len(w.posted) > 0 {
		buf := w.pending
		w.pending = w.spare[:0]
		post := w.takePosted(maxBatch)
		vec := w.vec
		w.vec = w.vecSpare[:0]
		batch := w.vecTaken
		if len(vec) > 0 {
			w.vecTaken++
		}
		w.mu.Unlock()
		var err error
		switch {
		case len(vec) == 0 && len(post) == 0:
			err = w.write(buf)
		case len(vec) == 0 && len(buf) == 0 && len(post) == 1:
			err = w.write(post[0])
		default:
			err = w.writeRound(buf, post, vec)
		}
		w.mu.Lock()
		if len(vec) > 0 && err == nil {
			w.vecSent = batch + 1
		}
		if err == nil {
			for _, c := range post {
				w.postOut += uint64(len(c))
			}
		}
		w.idle.Broadcast() // room in pending again; queued big frames sent
		if cap(buf) <= maxPooledBuf {
			w.spare = buf[:0]
		} else {
			w.spare = nil
		}
		for i, c := range post {
			if own := w.ownTake[i]; own != nil {
				PutBuf(own)
			} else {
				putLarge(c[:0])
			}
		}
		clear(w.ownTake)
		clear(post)
		w.postTake = post[:0]
		clear(vec) // the frames belong to their callers again
		w.vecSpare = vec[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// writeRound writes small, post and vec (any may be empty) with one
// vectored write where the stream supports it (net.Buffers.WriteTo uses
// writev on a socket and one Write per piece elsewhere).
func (w *Writer) writeRound(small []byte, post, vec net.Buffers) error {
	bufs := w.iov[:0]
	if len(small) > 0 {
		bufs = append(bufs, small)
	}
	bufs = append(bufs, post...)
	bufs = append(bufs, vec...)
	WriteSyscalls.Add(1)
	w.armDeadline()
	v := bufs // WriteTo consumes its receiver
	n, err := v.WriteTo(w.w)
	clear(bufs)
	w.iov = bufs[:0]
	if n > 0 && w.onWrite != nil {
		w.onWrite(int(n))
	}
	return err
}

// WriteSyscalls counts the writes all Writers of the process issued;
// benchmarks divide it by calls to report how well frames were batched.
var WriteSyscalls atomic.Int64

// SetTimeout bounds each write syscall when the stream supports write
// deadlines (net.Conn): a peer that stops reading for d fails the stream
// instead of blocking writers forever. Call it before the first Write.
func (w *Writer) SetTimeout(d time.Duration) {
	if dl, ok := w.w.(interface{ SetWriteDeadline(time.Time) error }); ok && d > 0 {
		w.deadline, w.timeout = dl, d
	}
}

func (w *Writer) write(p []byte) error {
	WriteSyscalls.Add(1)
	w.armDeadline()
	n, err := w.w.Write(p)
	if n > 0 && w.onWrite != nil {
		w.onWrite(n)
	}
	return err
}

// armDeadline gives the coming write at least the timeout. Moving the
// deadline costs a runtime timer update, so it is set with some slack and
// moved only once less than the timeout is left.
func (w *Writer) armDeadline() {
	if w.deadline == nil {
		return
	}
	if now := time.Now(); w.dlSet.Sub(now) < w.timeout {
		w.dlSet = now.Add(w.timeout + w.timeout/8)
		_ = w.deadline.SetWriteDeadline(w.dlSet)
	}
}

// Err returns the sticky write error, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Wait blocks until nothing is queued or being written, so a graceful
// shutdown knows every reply reached the socket before closing it.
func (w *Writer) Wait() {
	w.mu.Lock()
	for w.writing {
		w.idle.Wait()
	}
	w.mu.Unlock()
}
