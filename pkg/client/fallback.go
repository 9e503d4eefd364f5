package client

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// Fallback. When the fast path cannot be set up for a Conn — the device
// cannot be opened, the endpoint bootstrap fails (shm between two users:
// "bad peer attributes"), the server's budgets refuse the attach — a Conn
// made with WithRDMA("auto") (the default) carries its calls over TCP, with
// one log line and a count (FastPathFallbacks), and tries the fast path
// again after a backoff (WithFastPathRetry) so that a transient refusal
// does not keep it on TCP for its life; a Conn that
// insisted on a provider (WithRDMA("shm") or "ibv") fails the call with a
// *SetupError that names the cause.

// ErrFastPathSetup matches every *SetupError.
var ErrFastPathSetup = errors.New("client: fast path setup failed")

// SetupError is a lane or FLOCK handle that could not be set up.
type SetupError struct {
	Op        string // "lane" or "flock"
	Transport string // shm or rdma
	Err       error
}

func (e *SetupError) Error() string {
	msg := fmt.Sprintf("client: %s %s setup failed: %v", e.Transport, e.Op, e.Err)
	if e.Transport == hints.TransportSHM.String() && isBadPeer(e.Err) {
		// The kernel refuses to map another user's memory.
		msg += " (shm needs client and server to run as the same user, or use --transport tcp/auto)"
	}
	return msg
}

func (e *SetupError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFastPathSetup) true.
func (e *SetupError) Is(target error) bool { return target == ErrFastPathSetup }

var fallbacks atomic.Uint64

// FastPathFallbacks counts the Conns of this process that went back to
// TCP because their fast path could not be set up.
func FastPathFallbacks() uint64 { return fallbacks.Load() }

// FastPathErr says why this Conn's calls run over TCP although it offered
// lanes: its fast path failed to set up, or the server hung up on the
// HatRPC handshake (at its connection limit, say) and the Conn went on as
// plain Thrift. nil when neither happened.
func (c *Conn) FastPathErr() error {
	c.lanes.mu.Lock()
	off := c.lanes.off
	c.lanes.mu.Unlock()
	if off != nil {
		return off
	}
	if e := c.upgradeErr.Load(); e != nil {
		return *e
	}
	return nil
}

// setupFailed handles a fast-path setup failure: with auto, lanes go off
// for the Conn until the next re-try (errNoLane: the call runs over TCP);
// otherwise the call fails with the cause.
func (c *Conn) setupFailed(op string, tr hints.Transport, err error) error {
	se := &SetupError{Op: op, Transport: tr.String(), Err: err}
	if c.o.rdma != "auto" {
		return se
	}
	if c.lanes.fallBack(se) {
		fallbacks.Add(1)
		c.log().Warn("hatrpc: fast path unavailable; calls go over TCP", "server", c.addr, "err", se)
	}
	return errNoLane
}

// budgetRefusal reports whether an attach exception is a server budget.
func budgetRefusal(msg string) bool {
	return strings.Contains(msg, "fast-path budget exhausted")
}
