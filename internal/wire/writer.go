package wire

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
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
	writing bool
	err     error
	onWrite func(n int) // bytes-out accounting; may be nil
	idle    sync.Cond   // signalled when a flush round ends
	busy    bool        // the last flush found queued frames
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
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.writing {
		w.pending = append(w.pending, p...)
		w.mu.Unlock()
		return nil
	}
	w.writing = true
	var err error
	if w.busy {
		// Writers queued behind the last flush: yield once so the
		// goroutines about to write (replies being encoded, callers being
		// woken) join this syscall instead of each paying for one.
		w.pending = append(w.pending, p...)
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
	} else {
		w.mu.Unlock()
		err = w.write(p)
		w.mu.Lock()
	}
	queued := false
	for err == nil && len(w.pending) > 0 {
		queued = true
		buf := w.pending
		w.pending = w.spare[:0]
		w.mu.Unlock()
		err = w.write(buf)
		w.mu.Lock()
		if cap(buf) <= maxPooledBuf {
			w.spare = buf[:0]
		} else {
			w.spare = nil
		}
	}
	if err != nil && w.err == nil {
		w.err = err
		w.pending = nil
	}
	w.busy = queued
	w.writing = false
	err = w.err
	w.idle.Broadcast()
	w.mu.Unlock()
	return err
}

// WriteSyscalls counts the writes all Writers of the process issued;
// benchmarks divide it by calls to report how well frames were batched.
var WriteSyscalls atomic.Int64

func (w *Writer) write(p []byte) error {
	WriteSyscalls.Add(1)
	n, err := w.w.Write(p)
	if n > 0 && w.onWrite != nil {
		w.onWrite(n)
	}
	return err
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
