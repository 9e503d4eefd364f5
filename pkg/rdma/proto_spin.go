package rdma

// #include "hr_proto.h"
import "C"

import "time"

// An event endpoint's spin phase: what the tuner sets (SetSpin) and what
// a runtime holds at 0 while the endpoint's waits wait on its own
// goroutines (BlockWaits).

// SetSpin sets how long an event-polling endpoint spins before it blocks
// (0: block at once); it takes effect at the next wait. Safe from any
// goroutine; one cgo crossing, so callers change it only on a decision.
func (e *RPCEndpoint) SetSpin(d time.Duration) {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	e.spin = max(d, 0)
	if !e.blocked {
		e.applySpin(e.spin)
	}
}

// BlockWaits (on) makes every wait of an event-polling endpoint block at
// once, whatever SetSpin asked for, until BlockWaits(false) restores the
// spin SetSpin set last. For an endpoint whose waits wait on goroutines
// of this process, or of a peer on the same cores (a lane carrying a
// client or bidirectional stream: each message is handed between a
// lane's goroutine and the stream's user), where a spinning thread keeps
// the core the goroutine it waits for needs. No effect on a busy-polling
// endpoint (it has no channel to block on). Safe from any goroutine; one
// cgo crossing, so callers change it only when the endpoint's use does.
func (e *RPCEndpoint) BlockWaits(on bool) {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	if e.blocked == on {
		return
	}
	e.blocked = on
	if on {
		e.applySpin(0)
	} else {
		e.applySpin(e.spin)
	}
}

// WaitsBlocked reports whether BlockWaits holds the endpoint's waits
// blocked now.
func (e *RPCEndpoint) WaitsBlocked() bool {
	e.spinMu.Lock()
	defer e.spinMu.Unlock()
	return e.blocked
}

// applySpin sets the spin in C (spinMu held).
func (e *RPCEndpoint) applySpin(d time.Duration) {
	e.cmu.RLock()
	defer e.cmu.RUnlock()
	if !e.closed {
		C.hr_ep_set_spin(e.p, C.uint64_t(d))
		e.spins.Store(e.busy || d > 0)
	}
}
