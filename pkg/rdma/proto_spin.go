package rdma

// #include "hr_proto.h"
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// An event endpoint's spin phase: what the tuner sets (SetSpin), and its
// long waits parked in Go while they wait on goroutines of this process
// (BlockWaits); the time its waits polled (Spun).

// SetSpin sets how long an event-polling endpoint spins before it blocks
// (0: block at once); it takes effect at the next wait. Safe from any
// goroutine; one cgo crossing, so callers change it only on a decision.
func (e *RPCEndpoint) SetSpin(d time.Duration) {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	e.spin = max(d, 0)
	e.applySpin(e.spin)
}

// BlockWaits (on) makes the long waits of an event-polling endpoint (a
// call's for its reply, a server's for its next request) park in Go's
// netpoller at once, without a spin, until BlockWaits(false) (see
// proto_park.go). For an endpoint whose waits wait on goroutines of this
// process, or of a peer on the same cores (a lane carrying a client or
// bidirectional stream: each message is handed between a lane's goroutine
// and the stream's user): a thread spinning in C keeps the core the
// goroutine it waits for needs, and a wait blocked in C holds its thread
// (and its P until sysmon takes it), so the goroutine it wakes needs
// another. The waits within an exchange (a rendezvous's clear-to-send,
// its end, a READ), which the peer's engine answers without its
// goroutines, keep the spin SetSpin sets. No effect on a busy-polling
// endpoint (it has no channel to park on). Safe from any goroutine; a
// cgo crossing at most, so callers change it only when the endpoint's use
// does.
func (e *RPCEndpoint) BlockWaits(on bool) {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	if e.blocked == on {
		return
	}
	e.blocked = on
	e.park.Store(on && !e.busy) // a busy endpoint has no channel to park on
	e.applySpin(e.spin)
	if on {
		return
	}
	// The parker's fd goes now if no exchange runs (one that does closes
	// it as it ends: parkDone), so an endpoint done parking holds no more
	// fds than before.
	if e.mu.TryLock() {
		if !e.closed {
			e.parkDone()
		}
		e.mu.Unlock()
	}
}

// WaitsBlocked reports whether BlockWaits holds the endpoint's waits
// parked now.
func (e *RPCEndpoint) WaitsBlocked() bool {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	return e.blocked
}

// applySpin sets the spin in C (spinMu held). A parking endpoint's
// goroutine does not go on in C without blocking (its long waits park):
// it does not count as spinning (yieldSometimes, ServeCalls).
func (e *RPCEndpoint) applySpin(d time.Duration) {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if !e.closed {
		C.hr_ep_set_spin(e.p, C.uint64_t(d))
		e.spins.Store(e.busy || (d > 0 && !e.blocked))
	}
}

// Spun is the time the endpoint's waits have spent polling since it was
// created (busy polling, and an event wait's spin phase; not its
// sleeps): what the adaptive poller leaves out of the process's CPU load
// (fastpath.CountWaits). An estimate the engine keeps with no clock read
// on a message's path: a wait's empty polls at a calibrated cost each, a
// long spin by the clock reads it makes anyway. Safe from any goroutine;
// 0 once closed.
func (e *RPCEndpoint) Spun() time.Duration {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if e.closed {
		return 0
	}
	return time.Duration(atomic.LoadUint64((*uint64)(unsafe.Pointer(e.spun))))
}
