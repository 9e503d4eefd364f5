package server

import (
	"fmt"
	"net"
	"sync"
	"time"
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
	// SetupTimeout bounds the endpoint exchange after a granted attach:
	// a client that is granted a lane or FLOCK handle and never bootstraps
	// it gives its pending slot and memory back after this long.
	SetupTimeout time.Duration
}

// One remote host may hold at most 1/perHostShare of each budget, so a
// flood from one machine leaves room for the others. Clients on this host
// (loopback) are told apart by their user (lanesource.go): one user's
// setups may take all but 1/perHostShare of the pending places, so
// setups that never finish cannot lock other users out of the fast path;
// the other budgets they share (the kernel already limits shm to users
// the server lets in).
const perHostShare = 4

// DefaultLaneLimits fit the shm provider's 1 GiB segment with room to
// spare: 384 MiB of lanes, 128 FLOCK peers (~300 MiB). A remote host gets
// a quarter of each. 64 setups may be pending (48 of one local user):
// ten hatkv bench processes of one user starting at once under emulation
// had more than 24 pending at a time (a pending setup holds a count, not
// memory: its buffers are counted in Bytes).
var DefaultLaneLimits = LaneLimits{Lanes: 4096, Bytes: 384 << 20, Pending: 64, FlockPeers: 128, SetupTimeout: 5 * time.Second}

// WithLaneLimits sets the fast path's budgets (zero fields: the defaults).
func WithLaneLimits(l LaneLimits) Option { return func(o *options) { o.laneLimits = l } }

// ErrLaneBudget matches a lane or FLOCK attach refused by a budget.
var ErrLaneBudget = fmt.Errorf("server: fast-path budget exhausted")

type laneBudget struct {
	mu    sync.Mutex
	lim   LaneLimits
	total usage
	hosts map[string]*usage // by laneSource key: remote hosts, local users
	// peerUID finds the user of a loopback peer (procPeerUID; tests
	// stand in for it).
	peerUID func(local, remote net.Addr) (uint32, bool)
}

// usage is what the grants of the server, or of one host, hold.
type usage struct {
	lanes, pending, flockPeers int
	bytes                      int64
}

// hostOf is the host of a remote address, "" for loopback (or an
// address that does not parse).
func hostOf(remote string) string {
	h, _, err := net.SplitHostPort(remote)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(h); ip == nil || ip.IsLoopback() {
		return ""
	}
	return h
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
	if l.SetupTimeout <= 0 {
		l.SetupTimeout = d.SetupTimeout
	}
	b.lim = l
	b.peerUID = procPeerUID
}

// grant is what one lane or FLOCK handle holds of the budget.
type grant struct {
	b       *laneBudget
	host    string // the laneSource key
	bytes   int64
	flock   bool
	pending bool
	once    sync.Once
}

// check reports the first budget u would exceed with one more grant,
// each limit divided by div.
func (u *usage) check(lim LaneLimits, div int, bytes int64, flock bool) error {
	switch {
	case u.pending >= max(lim.Pending/div, 1):
		return fmt.Errorf("%d lane setups pending", u.pending)
	case flock && u.flockPeers >= max(lim.FlockPeers/div, 1):
		return fmt.Errorf("%d qp_sharing clients attached", u.flockPeers)
	case !flock && u.lanes >= max(lim.Lanes/div, 1):
		return fmt.Errorf("%d lanes open", u.lanes)
	case !flock && u.bytes+bytes > lim.Bytes/int64(div):
		return fmt.Errorf("lanes hold %d MiB of registered memory", u.bytes>>20)
	}
	return nil
}

// add counts g in u (sign 1) or takes it out (-1); its pending setup
// only while g is pending.
func (u *usage) add(sign int, g *grant) {
	if g.pending {
		u.pending += sign
	}
	if g.flock {
		u.flockPeers += sign
	} else {
		u.lanes += sign
		u.bytes += int64(sign) * g.bytes
	}
}

// grantKind is what a lane budget grant reserves.
type grantKind uint8

const (
	grantLane      grantKind = iota // a dedicated lane and its registered memory
	grantFlockPeer                  // a qp_sharing client's FLOCK attachment
)

// take reserves a lane (bytes of registered memory) or a FLOCK peer for
// the client src, as pending; the error names the budget that is
// exhausted, the server's or the source's share of it.
func (b *laneBudget) take(src laneSource, bytes int64, kind grantKind) (*grant, error) {
	flock := kind == grantFlockPeer
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.total.check(b.lim, 1, bytes, flock); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLaneBudget, err)
	}
	var hu *usage // src's, if it has a key
	if src.key != "" {
		hu = b.hosts[src.key]
		if hu == nil {
			hu = &usage{}
		}
		var err error
		if src.remote {
			err = hu.check(b.lim, perHostShare, bytes, flock)
		} else if most := b.lim.Pending - max(b.lim.Pending/perHostShare, 1); hu.pending >= max(most, 1) {
			err = fmt.Errorf("%d lane setups pending", hu.pending)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrLaneBudget, src.name(), err)
		}
		if b.hosts == nil {
			b.hosts = map[string]*usage{}
		}
		b.hosts[src.key] = hu
	}
	g := &grant{b: b, host: src.key, bytes: bytes, flock: flock, pending: true}
	if hu != nil {
		hu.add(1, g)
	}
	b.total.add(1, g)
	return g, nil
}

// ready marks the setup finished (it no longer counts as pending).
func (g *grant) ready() {
	if g == nil {
		return
	}
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if g.pending {
		g.pending = false
		g.b.total.pending--
		if hu := g.b.hosts[g.host]; hu != nil {
			hu.pending--
		}
	}
}

// release returns everything; safe to call more than once.
func (g *grant) release() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		g.ready()
		g.b.mu.Lock()
		defer g.b.mu.Unlock()
		g.b.total.add(-1, g) // no longer pending (ready)
		if hu := g.b.hosts[g.host]; hu != nil {
			if hu.add(-1, g); *hu == (usage{}) {
				delete(g.b.hosts, g.host)
			}
		}
	})
}
