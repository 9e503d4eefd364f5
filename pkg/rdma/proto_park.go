package rdma

/*
#include "hr_goglue.h"
*/
import "C"

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Parking: while BlockWaits holds an event endpoint's waits blocked, a
// long wait (a call's for its reply, a server's for its next request)
// does not sleep in C but in Go's netpoller, on the engine's completion
// channel. A wait blocked in C holds its OS thread, so the goroutine the
// wait's message wakes (a stream's caller, a handler) needs another thread
// woken for it: on a lane carrying a client or bidirectional stream that
// was 2.4-2.7 thread sleeps a 64 B round trip against TCP's 0.6
// (docs/performance/history.md, "Client and bidirectional streams on
// lanes"). Parked in Go, the goroutine frees its thread and is woken by
// the poller as a TCP stream's reader is.
//
// The engine does the ibv part (hr_ep_set_park): it polls, arms the CQ,
// polls again (a completion between the poll and the arm is not lost)
// and returns HR_EP_PARKED; the parker waits for the channel's fd to turn
// readable and resumes the exchange in C, which gets and acks the event
// and goes on. The same on both providers: ibv's completion channel fd,
// shm's channel epoll fd.
//
// The first C crossing of an exchange runs inside RawConn.Read's callback:
// Read clears the fd's readiness before the callback, so an event after
// the engine armed the CQ is always one the poller reports. Waking a
// parked exchange early (a cancel, an abort) sets a read deadline in the
// past; otherwise the wait's slice (hr_ep_park_ms: 50 ms, or less to a
// deadline or the end of a server's idle slice) bounds it, as it bounds a
// sleep in C.

// parkKind is the exchange a parker runs.
type parkKind uint8

const (
	parkCall parkKind = iota
	parkRecv
	parkReplyRecv
)

// longAgo is a read deadline that has passed: it wakes a parked wait.
var longAgo = time.Unix(1, 0)

// parker waits for an endpoint's completion channel in the netpoller: a
// dup of the channel's fd (the engine keeps its own). Created when the
// endpoint's waits first park and closed once BlockWaits lets them go, so
// an endpoint that does not park holds no extra fd.
type parker struct {
	e    *RPCEndpoint
	f    *os.File
	rc   syscall.RawConn
	kick atomic.Uint32 // bumped by wake
	step func(uintptr) bool

	// The exchange in hand (e.mu held): its kind and arguments, whether
	// its first crossing ran, its status, the kick count it started from.
	kind    parkKind
	started bool
	st      C.int
	proto   C.uint32_t
	n       C.uint64_t
	ms      C.int
	idle    C.int
	gen     C.uint32_t
	k       uint32
}

// newParker opens a parker on e's channel, nil if its fd cannot be waited
// on in the netpoller (the waits then block in C, as without parking).
func newParker(e *RPCEndpoint) *parker {
	fd := int(C.hr_ep_fd(e.p))
	if fd < 0 {
		return nil
	}
	nfd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil
	}
	// Non-blocking, so os.NewFile registers it with the poller (the
	// engine never reads it blocking: ibv's is non-blocking already,
	// shm's is an epoll fd, waited on with epoll_wait).
	if syscall.SetNonblock(int(nfd), true) != nil {
		syscall.Close(int(nfd))
		return nil
	}
	f := os.NewFile(nfd, "hatrpc-cq-channel")
	rc, err := f.SyscallConn()
	// A file the poller does not take has no deadlines.
	if err != nil || f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return nil
	}
	p := &parker{e: e, f: f, rc: rc}
	p.step = p.run
	return p
}

// run is the Read callback: the exchange's first crossing or its resume;
// true once it is over, false while it is parked (the deadline set to the
// engine's slice, or in the past if a wake came meanwhile).
func (p *parker) run(uintptr) bool {
	e := p.e
	p.k = p.kick.Load()
	switch {
	case !p.started:
		p.started = true
		switch p.kind {
		case parkCall:
			p.st = C.hrgo_call(e.epAddr(), p.proto, C.uintptr_t(uintptr(e.hold)), p.n, p.ms, p.gen, e.outAddr())
		case parkRecv:
			p.st = C.hrgo_recv(e.epAddr(), p.idle, p.ms, p.gen, e.outAddr())
		default:
			p.st = C.hrgo_reply_recv(e.epAddr(), p.proto, C.uintptr_t(uintptr(e.hold)), p.n, p.idle, p.ms, p.gen, e.outAddr())
		}
	case p.kind == parkCall:
		p.st = C.hrgo_call_resume(e.epAddr(), e.outAddr())
	default:
		p.st = C.hrgo_recv_resume(e.epAddr(), e.outAddr())
	}
	if p.st != C.HR_EP_PARKED {
		return true
	}
	e.parks.Add(1)
	_ = p.f.SetReadDeadline(time.Now().Add(time.Duration(*e.parkMs) * time.Millisecond))
	// A wake between the load above and this deadline would be lost
	// under it: wake bumps kick before it sets its deadline, so either
	// this sees the bump or wake's deadline comes after this one.
	if p.kick.Load() != p.k {
		_ = p.f.SetReadDeadline(longAgo)
	}
	return false
}

// exchange runs the exchange set up in p to its end, parking in the
// netpoller while the engine waits (e.mu held).
func (p *parker) exchange() C.int {
	p.started = false
	for {
		err := p.rc.Read(p.step)
		if err == nil {
			return p.st
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return p.finishInC()
		}
		// The slice passed, a wake came, or a deadline left from an
		// earlier wait: the next round resumes in C, which looks at
		// cancel, abort and the exchange's own deadline.
		_ = p.f.SetReadDeadline(time.Time{})
	}
}

// finishInC ends the exchange with the engine's waits blocking in C: the
// poller refused the fd (it cannot be closed under an exchange; this is
// a guard). The endpoint parks no more until BlockWaits is set again.
func (p *parker) finishInC() C.int {
	e := p.e
	e.park.Store(false)
	C.hr_ep_set_park(e.p, 0)
	e.cpark = false
	if !p.started {
		p.run(0)
	}
	for p.st == C.HR_EP_PARKED {
		p.run(0)
	}
	return p.st
}

// wake makes a parked wait resume in C now (after a cancel or an abort
// was flagged there). Any goroutine.
func (p *parker) wake() {
	p.kick.Add(1)
	_ = p.f.SetReadDeadline(longAgo)
}

// parking brings the engine's park switch and the parker in line with
// BlockWaits and returns the parker, nil when waits do not park (e.mu
// held, endpoint open). Two atomic loads when nothing changed.
func (e *RPCEndpoint) parking() *parker {
	p := e.pk.Load()
	if e.park.Load() == (p != nil) && e.cpark == (p != nil) {
		return p
	}
	want := e.park.Load()
	if want && p == nil {
		if p = newParker(e); p == nil {
			e.park.Store(false) // until BlockWaits(true) again
			want = false
		} else {
			e.pk.Store(p)
		}
	}
	if want != e.cpark {
		C.hr_ep_set_park(e.p, C.int(boolInt(want)))
		e.cpark = want
	}
	if !want && p != nil {
		e.pk.Store(nil)
		p.f.Close()
		p = nil
	}
	return p
}

// parkDone closes the parker after an exchange if BlockWaits let the
// waits go meanwhile (e.mu held, endpoint open).
func (e *RPCEndpoint) parkDone() {
	if e.pk.Load() != nil && !e.park.Load() {
		e.parking()
	}
}

// wakeParked wakes the exchange parked now, if any (cancel, Abort).
func (e *RPCEndpoint) wakeParked() {
	if p := e.pk.Load(); p != nil {
		p.wake()
	}
}

// closeParker closes the parker with the endpoint (e.mu held).
func (e *RPCEndpoint) closeParker() {
	if p := e.pk.Swap(nil); p != nil {
		p.f.Close()
	}
}

// Parking reports whether the endpoint holds a parker now (its waits
// park, or did and the exchange that will close it has not ended): one fd
// of its own. Any goroutine.
func (e *RPCEndpoint) Parking() bool { return e.pk.Load() != nil }

// ParkedWaits counts the waits that parked in Go's netpoller so far
// (BlockWaits). Any goroutine.
func (e *RPCEndpoint) ParkedWaits() uint64 { return e.parks.Load() }

// setEventSlice sets the longest slice of the endpoint's event waits
// (tests: a slice far longer than the test makes every wake-up of a
// parked wait the fd's, or a test fails on its hang guard).
func (e *RPCEndpoint) setEventSlice(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	C.hr_ep_set_event_slice(e.p, C.int(d/time.Millisecond))
}
