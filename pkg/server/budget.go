package server

import (
	"fmt"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// Lane budgets. Every granted lane and FLOCK handle takes registered
// memory of the server's device (on shm, of its one segment) before its
// bootstrap completes, so a client that asks for many — or for huge
// buffers, or never finishes the bootstrap — could starve everyone else.
// Grants are counted against server-wide limits; a request beyond them is
// refused (the client carries its calls over TCP), and what a lane held is
// returned when it ends, however it ends.

// LaneLimits bounds what clients may hold on the server's fast path; zero
// fields take the defaults (DefaultLaneLimits).
type LaneLimits struct {
	// Lanes bounds the open lanes (endpoint pairs) of all clients.
	Lanes int
	// Bytes bounds the registered memory of all lanes together (an
	// estimate from each lane's planned buffers).
	Bytes int64
	// Pending bounds the lanes and FLOCK handles granted but not yet
	// bootstrapped; each must finish within the setup timeout.
	Pending int
	// FlockPeers bounds the client processes attached through FLOCK
	// (each holds 4 QPs with their rings, ~2.3 MiB).
	FlockPeers int
}

// DefaultLaneLimits fit the shm provider's 1 GiB segment with room to
// spare: 384 MiB of lanes, 128 FLOCK peers (~300 MiB).
var DefaultLaneLimits = LaneLimits{Lanes: 4096, Bytes: 384 << 20, Pending: 32, FlockPeers: 128}

// WithLaneLimits sets the fast path's budgets (zero fields: the defaults).
func WithLaneLimits(l LaneLimits) Option { return func(o *options) { o.laneLimits = l } }

// ErrLaneBudget matches a lane or FLOCK attach refused by a budget.
var ErrLaneBudget = fmt.Errorf("server: fast-path budget exhausted")

type laneBudget struct {
	mu                         sync.Mutex
	lim                        LaneLimits
	lanes, pending, flockPeers int
	bytes                      int64
}

func (b *laneBudget) init(l LaneLimits) {
	d := DefaultLaneLimits
	if l.Lanes <= 0 {
		l.Lanes = d.Lanes
	}
	if l.Bytes <= 0 {
		l.Bytes = d.Bytes
	}
	if l.Pending <= 0 {
		l.Pending = d.Pending
	}
	if l.FlockPeers <= 0 {
		l.FlockPeers = d.FlockPeers
	}
	b.lim = l
}

// grant is what one lane or FLOCK handle holds of the budget.
type grant struct {
	b       *laneBudget
	bytes   int64
	flock   bool
	pending bool
	once    sync.Once
}

// take reserves a lane (bytes of registered memory) or a FLOCK peer, as
// pending; the error names the budget that is exhausted.
func (b *laneBudget) take(bytes int64, flock bool) (*grant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.pending >= b.lim.Pending:
		return nil, fmt.Errorf("%w: %d lane setups pending", ErrLaneBudget, b.pending)
	case flock && b.flockPeers >= b.lim.FlockPeers:
		return nil, fmt.Errorf("%w: %d qp_sharing clients attached", ErrLaneBudget, b.flockPeers)
	case !flock && b.lanes >= b.lim.Lanes:
		return nil, fmt.Errorf("%w: %d lanes open", ErrLaneBudget, b.lanes)
	case !flock && b.bytes+bytes > b.lim.Bytes:
		return nil, fmt.Errorf("%w: lanes hold %d MiB of registered memory", ErrLaneBudget, b.bytes>>20)
	}
	b.pending++
	if flock {
		b.flockPeers++
	} else {
		b.lanes++
		b.bytes += bytes
	}
	return &grant{b: b, bytes: bytes, flock: flock, pending: true}, nil
}

// ready marks the setup finished (it no longer counts as pending).
func (g *grant) ready() {
	if g == nil {
		return
	}
	g.b.mu.Lock()
	if g.pending {
		g.pending = false
		g.b.pending--
	}
	g.b.mu.Unlock()
}

// release returns everything; safe to call more than once.
func (g *grant) release() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		g.ready()
		g.b.mu.Lock()
		if g.flock {
			g.b.flockPeers--
		} else {
			g.b.lanes--
			g.b.bytes -= g.bytes
		}
		g.b.mu.Unlock()
	})
}

// laneBytes estimates the registered memory of an endpoint built from cfg:
// its pre-known and response buffers, the eager slots both ways and the
// rendezvous pool.
func laneBytes(cfg rdma.EndpointConfig) int64 {
	return int64(cfg.DirectSize) + int64(cfg.RespSize) + 2*int64(cfg.Slots)*int64(cfg.SlotSize) + int64(cfg.PoolSize)
}
