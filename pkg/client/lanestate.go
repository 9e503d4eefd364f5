//go:build cgo && linux

package client

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// LaneStats reports, per function that used lanes, how many are open and
// which engine protocols its requests went by (the plan in force).
func (c *Conn) LaneStats() []LaneStats {
	c.lanes.mu.Lock()
	pools := make([]*lanePool, 0, len(c.lanes.pools))
	for _, p := range c.lanes.pools {
		pools = append(pools, p)
	}
	c.lanes.mu.Unlock()
	out := make([]LaneStats, 0, len(pools))
	for _, p := range pools {
		st := LaneStats{Function: p.fn, Transport: p.tr.String(), Requests: map[string]uint64{}, Sent: map[string]uint64{}}
		sent, req := p.sentByProtocol(&st.Lanes)
		for i, n := range sent {
			if n > 0 {
				st.Sent[rdma.Protocol(i).String()] = n
			}
		}
		for i, n := range req {
			if n > 0 {
				name := "flock"
				if i < numProtocols {
					name = rdma.Protocol(i).String()
				}
				st.Requests[name] = n
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Function < out[j].Function })
	return out
}

// sentByProtocol is what the pool's lanes sent, open and closed ones, by
// the protocol the engine used, and the pool's requests (requests); open
// is set to the lanes open. A closing lane moves its final counts to
// p.sent and p.asked and leaves p.all under p.mu, so it is counted once.
// SentByProtocol and CallsByProtocol do not wait for a call in C.
func (p *lanePool) sentByProtocol(open *int) (sent [numProtocols]uint64, req [numProtocols + 1]uint64) {
	p.mu.Lock()
	*open = len(p.all)
	for l := range p.all {
		for i, n := range l.ep.SentByProtocol() {
			sent[i] += n
		}
	}
	for i := range sent {
		sent[i] += p.sent[i]
	}
	p.mu.Unlock()
	return sent, p.requests()
}

// requests counts the pool's requests by engine protocol, the last slot
// those via FLOCK: its lanes' exchanges (open and closed ones), plus the
// calls a batch carried past its exchange.
func (p *lanePool) requests() [numProtocols + 1]uint64 {
	var out [numProtocols + 1]uint64
	p.mu.Lock()
	for l := range p.all {
		for i, n := range l.ep.CallsByProtocol() {
			out[i] += n
		}
	}
	for i := range numProtocols {
		out[i] += p.asked[i]
	}
	p.mu.Unlock()
	for i := range p.calls {
		out[i] += p.calls[i].Load()
	}
	return out
}

// routeStats sums the calls the Conn's lane pools sent on lanes and
// through FLOCK.
func (ls *lanes) routeStats() RouteStats {
	ls.mu.Lock()
	pools := make([]*lanePool, 0, len(ls.pools))
	for _, p := range ls.pools {
		pools = append(pools, p)
	}
	ls.mu.Unlock() // not held while a pool's mu is taken (requests)
	var r RouteStats
	for _, p := range pools {
		for i, n := range p.requests() {
			if i == flockSlot {
				r.FLOCK += n
			} else {
				r.Lane += n
			}
		}
	}
	return r
}

// device returns the shared device for transport tr.
func (ls *lanes) device(tr hints.Transport) (*fastpath.Device, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		// close released (or handed to the last lane) the devices: one
		// opened now would be released by no one.
		return nil, ErrConnClosed
	}
	if d := ls.devs[tr]; d != nil {
		return d, nil
	}
	d, err := ls.c.acquire(context.Background(), tr)
	if err != nil {
		return nil, err
	}
	if ls.devs == nil {
		ls.devs = map[hints.Transport]*fastpath.Device{}
	}
	ls.devs[tr] = d
	return d, nil
}

// acquire opens the device for tr: on RDMA the device and source GID that
// route to the server (fastpath.AcquireFor), unless overridden.
func (c *Conn) acquire(ctx context.Context, tr hints.Transport) (*fastpath.Device, error) {
	return fastpath.AcquireFor(ctx, fastpath.Provider(tr), fastpath.Target{Spec: c.o.rdmaSpec, Remote: c.addr})
}

// disable keeps every later call of the Conn on TCP; true the first time.
func (ls *lanes) disable(err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.off == nil {
		ls.off = err
		ls.retryAt = time.Time{}
		ls.gen.Add(1)
		return true
	}
	return false
}

// fallBack puts the Conn's calls on TCP until the next try of the fast
// path (exponential backoff); true the first time for the Conn.
func (ls *lanes) fallBack(err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.off != nil {
		return false
	}
	ls.off = err
	ls.gen.Add(1)
	wait := ls.c.o.retryMin << min(ls.fails, 30)
	if wait <= 0 || wait > ls.c.o.retryMax {
		wait = ls.c.o.retryMax
	}
	ls.fails++
	ls.retryAt = ls.c.o.now().Add(wait)
	first := !ls.fellBack
	ls.fellBack = true
	return first
}

// setUp notes a fast-path setup that succeeded: the backoff starts over,
// and a Conn that had fallen back says it is on the fast path again.
func (ls *lanes) setUp() {
	ls.mu.Lock()
	back := ls.fails > 0
	ls.fails = 0
	ls.mu.Unlock()
	if back {
		ls.c.log().Info("hatrpc: fast path available again", "server", ls.c.addr)
	}
}

// generation is gen's value (route.go).
func (ls *lanes) generation() uint64 { return ls.gen.Load() }

// errShare: a sharing pool's dedicated lanes are all taken, so the call
// goes through FLOCK.
var errShare = errors.New("client: share the call")

// get takes an idle lane, opens a new one while under the limit, or waits.
// reqSize is the request at hand, which a new lane is sized for. With

// isOff reports whether lanes were turned off for the Conn.
func (ls *lanes) isOff() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.off != nil
}

// close ends every lane and releases the devices.
func (ls *lanes) close() {
	ls.mu.Lock()
	ls.closed = true
	ls.gen.Add(1)
	pools := ls.pools
	devs := ls.devs
	ls.pools, ls.devs = nil, nil
	ls.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		all := make([]*clane, 0, len(p.all))
		for l := range p.all {
			all = append(all, l)
		}
		p.mu.Unlock()
		// A lane in use is not closed here: its user may be reading a
		// reply in the lane's registered memory (a stream's runner filing
		// frames, a borrowed reply), which closing unmaps (a SIGSEGV in
		// internal/hatkv's TestScanStreamClientGoes). Every lane is
		// marked broken, so the user's put closes it; the idle ones are
		// closed now, and the links of the others, which tells their
		// servers and aborts the exchange in progress.
		for _, l := range all {
			l.broken.Store(true)
		}
		p.reapIdle()
		for _, l := range all {
			l.link.Close()
		}
	}
	ls.mu.Lock()
	if ls.live > 0 {
		ls.held, devs = devs, nil // the last lane's close releases them
	}
	ls.mu.Unlock()
	release(devs)
}

// laneClosed counts a lane gone; after close, the last one releases the
// devices close held for it.
func (ls *lanes) laneClosed() {
	ls.mu.Lock()
	ls.live--
	var devs map[hints.Transport]*fastpath.Device
	if ls.live == 0 && ls.closed {
		devs, ls.held = ls.held, nil
	}
	ls.mu.Unlock()
	release(devs)
}

func release(devs map[hints.Transport]*fastpath.Device) {
	for _, d := range devs {
		d.Release()
	}
}
