package wire

import (
	"bufio"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/internal/osyield"
)

// Polling a socket before parking, for request/response ping-pong.
//
// A reader that finds its socket empty parks, and its CPU goes idle. On
// these VMs waking an idle vCPU costs 30-80 µs, several times a small
// call: with client and server on separate CPUs a 64 B echo took 78-94 µs
// (p50, Apache Thrift 83-99 µs) while the work in it is about 10 µs.
// Polling the socket for a short while instead keeps the CPU awake for a
// reply or request that is about to come: 8.5-8.8 µs p50 then (atb-tcp,
// 2026-11-23).
//
// Polling only pays when exactly that is happening, so the owner arms it
// for the next read only: a caller whose call is the only one of its
// process in flight, a server connection that just answered a lone call
// while no other call runs. Under load a poll burns the CPU the peer and
// the other calls need: 64 pipelined callers lost 20-25 % calls/s when
// every read polled, and hatkv over TCP with 64 threads (a lone caller on
// each of 64 connections) 15 % ops/s when each lone caller polled. And
// only one reader of a process polls at a time.
//
// Between polls it yields the CPU (sched_yield), so a peer on the same
// CPU runs at once instead of after the poll. It does not yield to the
// process's goroutines: runtime.Gosched there woke idle threads, and so
// idle CPUs, which is what polling avoids; the poller holds one P for at
// most the window. Polls that time out mean the peer is not answering
// within the window (slow handler, think time): after spinMisses of them
// in a row polling stops for spinPause armed reads.

const (
	spinWindow = 50 * time.Microsecond
	spinMisses = 4
	spinPause  = 256
)

var polling atomic.Bool // a SpinReader of this process is polling

// SpinReader is an io.Reader over a socket whose next Read may poll.
// Arm and Read belong to the goroutine holding the connection's read role.
type SpinReader struct {
	nc     net.Conn
	rc     syscall.RawConn
	armed  bool
	misses int    // polls in a row that timed out
	pause  int    // armed reads left that do not poll
	onMiss func() // tests: runs when a poll times out, before the read parks

	// Bytes a ReadAhead took from the socket beyond its buffer: the
	// start of the next frame, ahead[aheadOff:aheadOff+aheadLen].
	ahead              [HeaderSize]byte
	aheadOff, aheadLen int

	// The raw reads' callbacks (poll, readAhead) as method values bound
	// once, and the state they share with Read and ReadAhead: a closure
	// per read would cost three allocations each time a lone call or a
	// burst ends, on both sides.
	pollFn, aheadFn func(fd uintptr) bool
	buf             []byte // the read's p while it runs
	n               int
	rerr            error
	polled          bool      // the poll's window passed
	deadline        time.Time // the poll's window ends
}

// NewSpinReader returns a SpinReader over nc, or nil if nc is not a plain
// socket (TLS, pipes): callers then read nc directly.
func NewSpinReader(nc net.Conn) *SpinReader {
	if !rawReads {
		return nil
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &SpinReader{nc: nc, rc: rc}
	r.pollFn, r.aheadFn = r.poll, r.readAhead
	return r
}

// Reader returns r as an io.Reader, or nc when r is nil.
func (r *SpinReader) Reader(nc net.Conn) io.Reader {
	if r == nil {
		return nc
	}
	return r
}

// Arm lets the next Read poll. Safe on a nil SpinReader.
func (r *SpinReader) Arm() {
	if r != nil {
		r.armed = true
	}
}

func (r *SpinReader) Read(p []byte) (int, error) {
	if n := r.readAheadBuffered(p); n > 0 {
		return n, nil
	}
	if !r.armed || len(p) == 0 {
		return r.nc.Read(p)
	}
	r.armed = false
	if r.pause > 0 {
		r.pause--
		return r.nc.Read(p)
	}
	// One poller per process: a second one would only take CPU from it.
	if !polling.CompareAndSwap(false, true) {
		return r.nc.Read(p)
	}
	defer polling.Store(false)
	r.polled = false
	r.deadline = time.Now().Add(spinWindow)
	n, rerr, err := r.rawReadWith(r.pollFn, p)
	if !r.polled {
		r.misses = 0
	}
	switch {
	case err != nil:
		return 0, r.opError(err)
	case rerr != nil:
		return 0, r.opError(os.NewSyscallError("read", rerr))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawReadWith runs one of the raw reads' callbacks (pollFn, aheadFn)
// over p and returns what it read: the state it shares with them is set
// here only, and p is not kept past the read.
func (r *SpinReader) rawReadWith(fn func(fd uintptr) bool, p []byte) (n int, rerr, err error) {
	r.buf, r.n, r.rerr = p, 0, nil
	err = r.rc.Read(fn)
	n, rerr = r.n, r.rerr
	r.buf, r.rerr = nil, nil
	return n, rerr, err
}

// poll is an armed read's raw read (rc.Read's callback): reads, yielding
// between them, until bytes come or the window passes; then one read
// each time the runtime's poller wakes it.
func (r *SpinReader) poll(fd uintptr) bool {
	for i := 0; ; i++ {
		r.n, r.rerr = rawRead(fd, r.buf)
		switch {
		case r.rerr == syscall.EINTR:
			continue
		case r.rerr != syscall.EAGAIN:
			return true
		case r.polled:
			// Woken by the poller after the window: one read, then
			// wait again if it was spurious.
			return false
		}
		if i&3 == 3 && time.Now().After(r.deadline) {
			r.polled = true
			r.misses++
			if r.misses >= spinMisses {
				r.misses, r.pause = 0, spinPause
			}
			if r.onMiss != nil {
				r.onMiss()
			}
			return false
		}
		osyield.Thread()
	}
}

// opError wraps err as net.Conn.Read would, so callers classify errors
// the same whichever way the bytes were read.
func (r *SpinReader) opError(err error) error {
	return &net.OpError{Op: "read", Net: r.nc.LocalAddr().Network(),
		Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: err}
}

// BufConn is a connection read through br, a buffered reader of it that
// may already hold bytes taken from the socket (the handshake's reader,
// when a connection becomes a lane or a FLOCK peer).
func BufConn(nc net.Conn, br *bufio.Reader) net.Conn { return bufConn{nc, br} }

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
