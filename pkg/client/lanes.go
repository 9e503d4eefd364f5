//go:build cgo && linux

package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Lanes carry a Conn's calls over the HatRPC engine once the server granted
// shm or rdma in the handshake (docs/design/lanes.md): one pool of lanes per
// function, each lane an endpoint pair doing one call at a time entirely in
// C, bootstrapped over its own TCP connection, which then stays open as the
// lane's liveness link.

// defaultMaxLanes is the lanes per function when the concurrency hint is
// lower: enough for a burst of callers without queueing on a 2-core box.
const defaultMaxLanes = 16

// laneOffer is what the handshake offers beyond HatRPC framing.
func (c *Conn) laneOffer() uint64 { return transport.Offer(c.o.rdma) }

// lanes is the Conn's set of lane pools.
type lanes struct {
	c     *Conn
	mu    sync.Mutex
	pools map[poolKey]*lanePool
	devs  map[hints.Transport]*fastpath.Device
	// live counts the lanes not yet closed: close releases the devices
	// only once none is left (a lane in use outlives close, and its
	// endpoint's QP lives on the device), else the last lane's close
	// does, from held.
	live   int
	setups uint64 // lanes set up so far (tests: a lane reused is none)
	held   map[hints.Transport]*fastpath.Device
	off    error // set while lanes are unusable: calls go over TCP
	closed bool
	// gen counts changes of off and closed: a cached route picked under
	// another generation is picked again (route.go).
	gen atomic.Uint64
	// A fallback after a failed setup is not for good: from retryAt the
	// fast path is tried again, with the wait doubling per failure (fails)
	// up to the Conn's maximum. retryAt zero: off stays (the server said
	// no lanes for this client).
	retryAt  time.Time
	fails    int
	fellBack bool // logged and counted once per Conn

	streamRoutes streamRoutes // stream_lane.go
}

// lanePool is the lanes of one function.
type lanePool struct {
	ls        *lanes
	fn        string // Service:name, as the server looks it up
	name      string // the name its calls carry: fn, or the bare name without a service
	tr        hints.Transport
	side      fastpath.Side
	set       hints.Set     // the client hints it was built from (told at attach)
	respSize  int           // the server's declared response size
	flockMax  int64         // the largest request FLOCK carries (table.FlockMax)
	tokens    chan struct{} // one per lane that may exist
	idle      chan *clane
	hot       atomic.Pointer[clane] // an idle lane outside idle: see put
	waiters   atomic.Int32          // callers blocked in get
	conflict  atomic.Pointer[fastpath.PlanError]
	batch     *batcher // RF-RPC batching (batch hint), nil when off
	share     bool     // qp_sharing: calls go through the process's FLOCK handle
	canShare  bool     // payloads fit FLOCK: with qp_sharing=auto, overflow goes there
	dedicated int      // lanes in use past which a canShare pool's callers go through FLOCK
	// calls counts requests the lanes' endpoints do not: a batch's calls
	// past its one exchange, by engine protocol; last: via FLOCK. A lane's
	// exchanges are counted by its endpoint (CallsByProtocol, in C): no
	// atomic add a call (requests sums the two).
	calls   [numProtocols + 1]atomic.Uint64
	maxReq  atomic.Int64 // largest request seen: new lanes are sized for it
	maxResp atomic.Int64 // largest response seen
	// lastReq is the size of the last request: a sharing pool sends a
	// caller past its dedicated lanes through FLOCK only if that fit (the
	// request is encoded after the route is chosen), so a function of
	// large calls does not encode each one twice.
	lastReq atomic.Int64

	// draining counts the lanes canceled streams are giving back (their
	// handshake under way), which a caller finding no idle lane waits for
	// (waitDrained, stream_lanecancel.go); dch wakes it, under dmu.
	draining atomic.Int32
	dmu      sync.Mutex
	dch      chan struct{}
	// live: the streams on the pool's lanes (track), for a caller finding
	// no idle lane to start the cancel of one whose context ended before
	// its watcher ran (cancelEnded); nlive is len(live).
	smu   sync.Mutex
	live  map[*laneRunner]struct{}
	nlive atomic.Int32

	mu    sync.Mutex
	all   map[*clane]struct{}
	sent  [numProtocols]uint64 // messages closed lanes sent, by the protocol the engine used
	asked [numProtocols]uint64 // exchanges closed lanes made, by the protocol asked for
}

// clane is one lane of a client.
type clane struct {
	p      *lanePool
	codec  *wire.Codec // the lane's own: one call at a time; never pooled (close may race a call)
	buf    []byte      // where a call not in a lease is encoded
	pd     *rdma.PD
	ep     *rdma.RPCEndpoint
	link   *fastpath.Link
	unreg  func() // the tuner's spin, adaptive and busy lanes
	unwait func() // counted among the waiting lanes
	goaway atomic.Bool
	broken atomic.Bool
	once   sync.Once
	// streams numbers the streams opened on the lane, as the server
	// does (the stream's Cancel names it: stream_lanecancel.go). The
	// lane's holder's.
	streams uint32
	// linkCancel: the server granted wire.CapLaneCancel, so a stream's
	// cancel may go on the lane's link; a server without it closes the
	// lane on one (stream_lanecancel.go). Read-only once open.
	linkCancel bool
	// blocked: the lane is a client or bidirectional stream's first, its
	// waits block at once (streamBlock); put restores its spin. Read and
	// written by the lane's holder only.
	blocked bool
	// head is the head of the lane's last plain reply: the frame header
	// after its length, and the Thrift message header (see replyBody).
	head []byte
	// plain is the last context the lane's calls ran under that carried
	// no outgoing headers (see plainMemo).
	plain plainMemo
}

const (
	numProtocols = rdma.NumProtocols
	flockSlot    = numProtocols
)

// leaseMin is the message size from which encoding into the engine's
// registered buffer (saving a copy) pays for the extra cgo crossing.
const leaseMin = 16 << 10

// poolKey names a function's pool; a struct, so finding the pool per
// call builds no string.
type poolKey struct{ svc, fn string }

// pool returns the function's lane pool; errNoLane while the fast path is
// off, with the time from which it is tried again (zero: never).
func (ls *lanes) pool(m *Method, tr hints.Transport) (*lanePool, time.Time, error) {
	key := poolKey{m.Service, m.Name}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil, time.Time{}, &ConnError{Op: "call", Err: errors.New("Conn closed")}
	}
	if ls.off != nil {
		if ls.retryAt.IsZero() || ls.c.o.now().Before(ls.retryAt) {
			return nil, ls.retryAt, errNoLane
		}
		ls.off = nil // try the fast path again; a failure sets the next wait
		ls.gen.Add(1)
	}
	if p := ls.pools[key]; p != nil && p.tr == tr {
		return p, time.Time{}, nil
	}
	set, respSize := ls.c.laneSet(m.Hints)
	// A stream holds its lane: planned as one (no FLOCK, no batches).
	t := ls.c.tableFor(set, respSize, tr, m.Stream)
	n := ls.c.o.maxLanes
	if n <= 0 {
		n = max(t.Concurrency, defaultMaxLanes)
	}
	p := &lanePool{ls: ls, fn: key.svc + ":" + key.fn, name: m.Name, tr: tr, set: set, respSize: respSize,
		side:   fastpath.PlanSide(&t, ls.c.o.limits.MaxMessageSize+wire.HeaderSize),
		tokens: make(chan struct{}, n), idle: make(chan *clane, n), all: map[*clane]struct{}{}}
	if t.Batch != hints.BatchOff {
		p.batch = newBatcher(p, &t)
	}
	// The table routes the function's calls: FLOCK rows mean the pool
	// shares (route FLOCK, larger requests on a lane), Overflow that
	// qp_sharing=auto sends callers past the dedicated lanes there.
	p.share = t.Rows[0].Route == hints.RouteFLOCK
	p.canShare = t.Overflow
	p.flockMax = int64(t.FlockMax)
	// qp_sharing=auto: dedicated lanes up to the cores, every caller past
	// them through FLOCK. Each lane's caller waits in C, spinning when the
	// plan polls: more lanes than cores over-subscribe the CPU (HatRPC's
	// case for sharing), and a lane per caller pays a wake-up on both
	// sides for every call once the tuner blocks, where FLOCK's callers
	// coalesce (512 B at 64 callers on 2 cores: ~110k calls/s on 16 lanes,
	// ~250k on 2 lanes and FLOCK; docs/performance/history.md).
	p.dedicated = n
	if p.canShare {
		p.dedicated = min(n, runtime.NumCPU())
	}
	if ls.pools == nil {
		ls.pools = map[poolKey]*lanePool{}
	}
	if key.svc != "" {
		p.name = p.fn
	}
	ls.pools[key] = p
	return p, time.Time{}, nil
}

// getMode is what get does when no lane is idle.
type getMode uint8

const (
	getWait      getMode = iota // open one while under the limit, or wait
	getShareable                // a call FLOCK could carry: open a dedicated one or errShare
)

// growReq and growResp keep the largest request and response seen: new
// lanes are sized for them.
// maxBody is the largest frame payload the pool's lanes carry (the plan
// sized their engines: fastpath.PlanSide): a larger frame cannot be sent
// at all, whatever the message limit (WithLimits) allows.
func (p *lanePool) maxBody() int { return p.side.Config.MaxMessage - wire.HeaderSize }

func (p *lanePool) growReq(n int) {
	if int64(n) > p.maxReq.Load() {
		p.maxReq.Store(int64(n))
	}
}

func (p *lanePool) growResp(n int) {
	if int64(n) > p.maxResp.Load() {
		p.maxResp.Store(int64(n))
	}
}

// get takes an idle lane, opens a new one while under the limit, or
// waits. reqSize is the request at hand, which a new lane is sized for.
// With getShareable (a call FLOCK could carry), it does not wait, nor
// open more than the pool's dedicated lanes: errShare instead.
func (p *lanePool) get(ctx context.Context, reqSize int, mode getMode) (*clane, error) {
	p.growReq(reqSize)
	if pe := p.conflict.Load(); pe != nil {
		return nil, pe
	}
	if l := p.takeIdle(); l != nil {
		return l, nil
	}
	p.cancelEnded()
	if p.draining.Load() > 0 {
		if l := p.waitDrained(ctx); l != nil {
			return l, nil
		}
	}
	// A put that saw no waiter may have left its lane in hot just now:
	// look again once counted (see put).
	p.waiters.Add(1)
	defer p.waiters.Add(-1)
	if l := p.usable(p.hot.Swap(nil)); l != nil {
		return l, nil
	}
	if mode == getShareable {
		return p.openDedicated(ctx, reqSize)
	}
	for {
		select {
		case l := <-p.idle:
			if l = p.usable(l); l == nil {
				continue // its token is free: the next round may open one
			}
			return l, nil
		case p.tokens <- struct{}{}:
			l, err := p.open(ctx, reqSize)
			if err != nil {
				<-p.tokens
				return nil, err
			}
			return l, nil
		case <-ctx.Done():
			return nil, notSent(ctx.Err()) // waited for a lane: nothing sent
		}
	}
}

// openDedicated opens a lane while fewer than p.dedicated are open, and
// reports errShare otherwise: a token is taken, then given back if it was
// one too many, so concurrent callers never open more.
func (p *lanePool) openDedicated(ctx context.Context, reqSize int) (*clane, error) {
	select {
	case p.tokens <- struct{}{}:
	default:
		return nil, errShare
	}
	if len(p.tokens) > p.dedicated {
		<-p.tokens
		return nil, errShare
	}
	l, err := p.open(ctx, reqSize)
	if err != nil {
		<-p.tokens
		return nil, err
	}
	return l, nil
}

// takeIdle takes an idle lane without waiting, nil when there is none:
// the one in hot first (an atomic swap, where a channel receive costs a
// lock), then one from the channel.
func (p *lanePool) takeIdle() *clane {
	for {
		l := p.takeAny()
		if l == nil {
			return nil
		}
		if l = p.usable(l); l != nil {
			return l
		}
	}
}

// takeAny takes an idle lane, the hot one first, whatever its state; nil
// when there is none.
func (p *lanePool) takeAny() *clane {
	if l := p.hot.Swap(nil); l != nil {
		return l
	}
	select {
	case l := <-p.idle:
		return l
	default:
		return nil
	}
}

// usable returns l, or closes it and returns nil when its server went
// away or drains while it sat idle: a caller given it would fail with
// "rdma: closed" although a new lane (to a restarted server) would work.
func (p *lanePool) usable(l *clane) *clane {
	if l == nil {
		return nil
	}
	if l.broken.Load() || l.goaway.Load() {
		l.close()
		return nil
	}
	return l
}

// reapIdle closes the idle lanes whose server went away, so that what they
// hold (registered memory, the endpoint, the link) goes with the peer and
// not at the next call; the healthy ones are put back.
func (p *lanePool) reapIdle() {
	var keep []*clane
	for range cap(p.idle) + 1 {
		l := p.takeAny()
		if l == nil {
			break
		}
		if l = p.usable(l); l != nil {
			keep = append(keep, l)
		}
	}
	for _, l := range keep {
		p.put(l)
	}
}

// tryIdle takes an idle lane without waiting: nil when there is none, or
// when the pool's plan conflicts (get reports that).
func (p *lanePool) tryIdle() *clane {
	if p.conflict.Load() != nil {
		return nil
	}
	return p.takeIdle()
}

// noteReq records the size of a request (a store only when it changed:
// an atomic store is a locked instruction on every call otherwise).
func (p *lanePool) noteReq(n int) {
	if int64(n) != p.lastReq.Load() {
		p.lastReq.Store(int64(n))
	}
}

// saturated reports that the lanes a sharing pool keeps for callers of
// their own (p.dedicated) are open and busy.
func (p *lanePool) saturated() bool {
	return p.hot.Load() == nil && len(p.idle) == 0 && len(p.tokens) >= p.dedicated
}

// put returns a lane after a call; a broken or drained one is closed and
// its place freed for a new one. With nobody waiting in get the lane goes
// to hot when that is empty; a waiter is only woken by the channel, so a
// put that finds one counted after it filled hot moves the lane there
// (get counts itself before it looks at hot: one of the two sees the
// other).
func (p *lanePool) put(l *clane) {
	if l.broken.Load() || l.goaway.Load() {
		l.close()
		return
	}
	if l.blocked {
		l.blocked = false
		l.ep.BlockWaits(false) // a call's spin again, the tuner's
	}
	if p.waiters.Load() == 0 && p.hot.CompareAndSwap(nil, l) {
		if p.waiters.Load() == 0 {
			return
		}
		if l = p.hot.Swap(nil); l == nil {
			return // taken already
		}
	}
	p.idle <- l
}

// open attaches a new lane: a TCP connection whose hello asks for the lane,
// then the endpoint bootstrap over it.
func (p *lanePool) open(ctx context.Context, reqSize int) (_ *clane, err error) {
	c := p.ls.c
	dctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
	defer cancel()
	d, err := p.ls.device(p.tr)
	switch {
	case errors.Is(err, ErrConnClosed):
		return nil, err // not the fast path's failure: no fallback
	case err != nil:
		return nil, c.setupFailed("lane", p.tr, err)
	}
	// Sizes for both sides' buffers: declared, or the largest seen (with
	// no reply seen yet, as large as the request: echo-like services).
	req := max(int64(p.set.PayloadSize), p.maxReq.Load(), int64(reqSize))
	resp := max(int64(p.respSize), p.maxResp.Load())
	if resp == 0 {
		resp = req
	}
	nc, br, rep, exc, err := c.attach(dctx, &wire.Attach{Transport: p.tr.String(), Function: p.fn,
		ClientTransport: p.set.Transport.String(), ClientProtocol: p.set.Protocol.String(),
		RequestSize: req, ResponseSize: resp})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	switch {
	case exc != nil && exc.Type == proto.ExcInvalidProtocol:
		pe := &fastpath.PlanError{Function: p.fn, Reason: exc.Message}
		p.conflict.Store(pe)
		return nil, pe
	case exc != nil && budgetRefusal(exc.Message):
		return nil, c.setupFailed("lane", p.tr, fmt.Errorf("refused by the server: %s", exc.Message))
	case exc != nil || rep.Caps&wire.CapAttach == 0:
		// The server will not give lanes to this client (draining, or it
		// changed its mind): the Conn carries on over TCP.
		p.ls.disable(fmt.Errorf("lane refused: %v", exc))
		return nil, errNoLane
	}
	l := &clane{p: p, codec: wire.GetCodec(), buf: make([]byte, 0, 512), linkCancel: rep.Caps&wire.CapLaneCancel != 0}
	if l.pd, err = d.AllocPD(); err != nil {
		return nil, c.setupFailed("lane", p.tr, err)
	}
	if l.ep, err = rdma.NewRPCEndpoint(l.pd, p.side.Sized(int(min(resp, fastpath.MaxMessage)), 0).Config); err != nil {
		_ = l.pd.Close()
		return nil, c.setupFailed("lane", p.tr, err)
	}
	if err = l.ep.Bootstrap(dctx, wire.BufConn(nc, br)); err != nil {
		_ = l.ep.Close()
		_ = l.pd.Close()
		if ctx.Err() != nil {
			return nil, &ConnError{Op: "lane", Err: err} // the call's own deadline, not the fast path
		}
		return nil, c.setupFailed("lane", p.tr, err)
	}
	switch p.side.Polling {
	case hints.PollAdaptive:
		l.unreg = fastpath.RegisterAdaptive(l.ep)
	case hints.PollBusy:
		l.unreg = fastpath.RegisterBusy(l.ep)
	}
	l.unwait = fastpath.CountWaits(l.ep) // waiting while a call is in C
	l.link = fastpath.Watch(nc, func() { l.goaway.Store(true) }, func() {
		wasBroken := l.broken.Swap(true)
		l.ep.Abort()
		if !wasBroken {
			// The peer went (not our own close, which marks the lane
			// broken first). Not here: close waits for this watcher.
			go p.reapIdle()
		}
	})
	p.ls.mu.Lock()
	p.ls.live++
	p.ls.setups++
	p.ls.mu.Unlock()
	p.mu.Lock()
	p.all[l] = struct{}{}
	p.mu.Unlock()
	p.ls.setUp()
	return l, nil
}

// attach dials a new connection and sends the hello asking to turn it into
// a lane (or the FLOCK handle); the caller closes nc unless it keeps it.
func (c *Conn) attach(dctx context.Context, a *wire.Attach) (net.Conn, *bufio.Reader, *wire.HelloReply, *proto.ApplicationException, error) {
	nc, err := c.dialRaw(dctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	br := bufio.NewReaderSize(nc, 4<<10)
	hello := wire.Hello{Version: wire.Version, Caps: wire.CapFraming | wire.CapAttach | c.laneOffer(),
		MaxFrame: int32(min(c.o.limits.MaxMessageSize, 1<<31-1)), Host: fastpath.HostID(), Attach: a,
		Windows: c.laneWindows()} // for a stream the lane carries (stream_lane.go)
	if !c.o.streams.noLinkCancel {
		hello.Caps |= wire.CapLaneCancel // a stream's cancel on the link (stream_lanecancel.go)
	}
	hctx, hcancel := context.WithTimeout(dctx, c.o.handshakeTimeout)
	rep, exc, err := c.helloExchange(hctx, nc, br, wire.Format{Proto: c.o.proto, Framed: c.o.framed}, &hello)
	hcancel()
	if err != nil {
		nc.Close()
		return nil, nil, nil, nil, err
	}
	return nc, br, rep, exc, nil
}

// close tears the lane down and frees its place in the pool.
func (l *clane) close() {
	l.once.Do(func() {
		l.broken.Store(true)
		l.link.Close() // the watcher aborts the endpoint: a call in C returns
		if l.unreg != nil {
			l.unreg()
		}
		l.unwait()
		_ = l.ep.Close()
		_ = l.pd.Close()
		p := l.p
		final, asked := l.ep.SentByProtocol(), l.ep.CallsByProtocol()
		p.mu.Lock()
		for i, n := range final {
			p.sent[i] += n
			p.asked[i] += asked[i]
		}
		delete(p.all, l)
		p.mu.Unlock()
		<-p.tokens
		p.ls.laneClosed()
	})
}

// pickRoute picks the route of m's calls on s, a session with a fast
// path: TCP for a function pinned to it, its lane pool, or FLOCK for one
// whose plan shares QPs. While the fast path is off it is TCP, until
// retryAt (zero: for good).
func (c *Conn) pickRoute(s *session, m *Method) (_ route, retryAt time.Time, _ error) {
	want := hints.TransportAuto
	if m.Hints != nil {
		want = m.Hints.Client.Transport
	}
	tr := fastpath.PickTransport(want, s.caps)
	if !transport.Lanes(tr) {
		return tcpRoute{c}, time.Time{}, nil
	}
	p, retryAt, err := c.lanes.pool(m, tr)
	switch {
	case err == errNoLane:
		return tcpRoute{c}, retryAt, nil
	case err != nil:
		return nil, time.Time{}, err
	case p.share:
		return flockRoute{p}, time.Time{}, nil
	}
	return p, time.Time{}, nil
}

// planChecks lists the client plans of the WithHints functions for the
// server to check in the handshake, so a plan it cannot serve fails Dial
// rather than a later call.
func (c *Conn) planChecks() []wire.Attach {
	var out []wire.Attach
	room := wire.MaxHelloSize - helloBase
	total, first := 0, ""
	for _, svc := range c.o.hints {
		for i := range svc.Functions {
			total++
			set := svc.Functions[i].Client
			if c.o.svcLevel {
				set = svc.Client
			}
			a := wire.Attach{Function: svc.Name + ":" + svc.Functions[i].Name,
				ClientTransport: set.Transport.String(), ClientProtocol: set.Protocol.String()}
			// A hello is read up to wire.MaxHelloSize whatever the
			// server's limit; the plans past it are checked when their
			// lanes are attached.
			if first == "" {
				if room -= a.MaxEncodedSize(); room >= 0 {
					out = append(out, a)
					continue
				}
				first = a.Function
			}
		}
	}
	if first != "" && !c.helloCutLogged.Swap(true) {
		// Said once a Conn: a plan conflict of the others then shows at
		// their first call instead of at Dial, which would surprise a
		// user who relies on Dial checking every plan.
		c.log().Info("hatrpc: client: the handshake checks the plans of the first functions only; the others are checked at their first call on a lane",
			"checked", len(out), "functions", total, "first_unchecked", first, "hello_bound_bytes", wire.MaxHelloSize)
	}
	return out
}

// helloBase bounds a hello's size without its plans: 95 bytes and the
// host id, with room to spare.
const helloBase = 512

// isBadPeer: the shm provider refused the peer's memory (another user's).
func isBadPeer(err error) bool { return errors.Is(err, rdma.ErrBadPeer) }
