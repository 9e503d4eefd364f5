//go:build cgo && linux

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A lane is one RPCEndpoint pair for one function of one client: the TCP
// connection that asked for it carries the endpoint bootstrap and then
// stays open as its liveness link (docs/design/lanes.md). The conn keeps
// its place in the server's books, so connection limits, Shutdown and
// Close apply to lanes as to any connection.
type lane struct {
	fn   string
	m    *method // the function (not for the FLOCK session)
	side fastpath.Side
	tr   uint8 // label index of its transport (trOf)
	stop chan struct{}
	link *fastpath.Link

	in, out prometheus.Counter // bytes
	meter   *laneMeter         // a dedicated lane's call counts, while it serves

	numa hints.NUMA // the function's numa hint

	ep       *rdma.RPCEndpoint // set once bootstrapped (not for the FLOCK session)
	maxReply atomic.Int64      // largest reply sent: large ones go through a lease

	// viaFLOCK: this is no lane but the FLOCK session, standing for the
	// FLOCK handle of every client of the process; its calls run
	// concurrently on the FLOCK workers. It rides on the lane types
	// because its calls decode, dispatch and encode replies exactly as a
	// lane's do: only the reply storage and call contexts differ.
	viaFLOCK bool

	grant *grant // what the lane holds of the server's budgets

	// peerWin: the receive windows the client grants the streams this
	// lane carries (its attach hello).
	peerWin wire.StreamWindows
	// linkCancel: the lane was granted wire.CapLaneCancel, so its link
	// takes the client's cancels (fastpath.Cancel); without it a cancel
	// is the client gone, as to a server that does not know it.
	linkCancel bool
}

// laneSession is the fast-path side of a TCP connection that became a
// lane or a FLOCK handle's link: it owns the lane (its endpoint, or the
// FLOCK peer), the lane's share of the budgets, its reply buffer, and
// its teardown, which ends the connection as any other. The conn only
// delegates: its hello grants the lane (grantLane), its reader hands the
// connection over (serve) and a drain stops it (stop). The FLOCK
// session is one too (lane.viaFLOCK says why).
type laneSession struct {
	c   *conn
	l   *lane
	up  bool   // bootstrapped and counted; under c.mu
	buf []byte // reply buffer: a lane answers one call at a time

	metered bool // the call in hand was counted by the lane's meter

	// What a lane's one call at a time uses (not the FLOCK session's, whose
	// calls run concurrently on the FLOCK workers): see call and lookup.
	codec    *wire.Codec
	ctxs     ctxSlab
	spareCtx *callCtx // the last borrow_ctx call's context, ended, for the next (borrowedCtx)
	mc       methodCache
	next     nextCall // the arguments and call value for the next call of next.m
	end      laneEnd  // what is left of the last call once its reply is out
	// inBatch: the calls of an RF-RPC batch run one after the other, so
	// each reads the clock for its start rather than the batch's arrival.
	inBatch bool
	head    reqHead // what the lane's plain calls start with (lanehead.go)

	flockCtxs sharedSlab // the FLOCK session's call contexts (its calls run concurrently)

	stream laneStream // the stream the lane carries, if any (stream_lane.go)
	// streams numbers the streams opened on the lane (the lane's
	// goroutine's, written under c.mu with c.st: the link's watcher reads
	// it); canceled is the number of the last one the client canceled by
	// the link, and cancels wakes a poll held meanwhile (fastpath.Cancel).
	streams  uint32
	canceled atomic.Uint32
	cancels  chan struct{}
	joined   *laneJoin // the stream whose client's frames the lane carries, if any (stream_lane.go)

	// room is what the lane's replies hold of the memory budget,
	// batchLim the reply limit of a batch's call in hand and batchLen its
	// frame's length so far (lanereply.go).
	room     laneRoom
	batchLim int
	batchLen int
}

// nextCall is a call value (Method.NewCall) a lane reset once its call's
// reply was encoded, for its next call of the same method: a lane runs
// one call at a time, so a call of a generated method allocates nothing.
type nextCall struct {
	m    *method
	args proto.Struct
	call any
}

// laneCaps is what the server grants a client's hello: its device's
// transport when the client offers it, and for a same-host transport
// (shared memory) only to a client on this host.
func (s *Server) laneCaps(h *wire.Hello, local net.Addr) uint64 {
	d := s.device(local, hints.NUMANone)
	if d == nil {
		return 0
	}
	t := transport.Of(d.Transport())
	if t == nil || h.Caps&t.Cap == 0 || t.SameHost && (h.Host == "" || h.Host != fastpath.HostID()) {
		return 0
	}
	return t.Cap
}

// grantLane checks an attach request against the lane capabilities the
// server grants the client; the exception says why it is refused.
// grantCancel grants the lane wire.CapLaneCancel when its client offered
// it (not to the FLOCK session): the client may then cancel the lane's
// stream on its link.
func (l *lane) grantCancel(h *wire.Hello) uint64 {
	if l.viaFLOCK || h.Caps&wire.CapLaneCancel == 0 {
		return 0
	}
	l.linkCancel = true
	return wire.CapLaneCancel
}

func (c *conn) grantLane(h *wire.Hello, caps uint64) (*lane, *proto.ApplicationException) {
	a := h.Attach
	want, err := hints.ParseTransport(a.Transport)
	if err != nil || !transport.Granted(want, caps) {
		return nil, proto.NewApplicationException(proto.ExcUnsupportedClientType,
			fmt.Sprintf("hatrpc: no %q lanes for this client", a.Transport))
	}
	c.mu.Lock()
	draining := c.draining
	c.mu.Unlock()
	if draining || c.s.shutting.Load() {
		return nil, proto.NewApplicationException(proto.ExcUnsupportedClientType, "hatrpc: server shutting down")
	}
	tr := trOf(want)
	if a.Function == fastpath.FlockFunction {
		g, err := c.s.laneBudget.take(c.laneSource(), 0, grantFlockPeer)
		if err != nil {
			return nil, c.refuseBudget(a.Function, err)
		}
		return &lane{fn: a.Function, tr: tr, viaFLOCK: true, stop: make(chan struct{}), grant: g}, nil
	}
	// Only a registered function gets a lane, planned from its own hints.
	m := c.s.lookup([]byte(a.Function))
	if m == nil {
		c.s.met.rejected.WithLabelValues("unknown_function").Inc()
		return nil, proto.NewApplicationException(proto.ExcUnknownMethod,
			fmt.Sprintf("hatrpc: no lane for %q: no such function", a.Function))
	}
	set, reqSize := m.set, m.reqSize
	// The reply plan for this lane's transport: on shm the planner adapts
	// the design space (pkg/hints).
	t := serverTable(set, reqSize, want, m.m.Stream)
	side := fastpath.PlanSide(&t, c.s.opts.limits.MaxMessageSize+wire.HeaderSize)
	numa := set.NUMA
	ct, err := hints.ParseTransport(a.ClientTransport)
	if err != nil {
		ct = hints.TransportAuto
	}
	if err := fastpath.CheckPair(a.Function, want, ct, set); err != nil {
		var pe *fastpath.PlanError
		errors.As(err, &pe)
		c.s.log.Warn("hatrpc: lane refused", "remote", c.remote, "err", err)
		return nil, proto.NewApplicationException(proto.ExcInvalidProtocol, pe.Reason)
	}
	// The client's sizes (declared or seen) size what this side receives
	// (requests) and publishes (RFP responses), so they need no rendezvous.
	// Sizes beyond what the server accepts anyway are the client's
	// fantasy, not a reason to register memory.
	maxMsg := int64(min(c.s.opts.limits.MaxMessageSize+wire.HeaderSize, fastpath.MaxMessage))
	side = side.Sized(int(max(min(a.RequestSize, maxMsg), 0)), int(max(min(a.ResponseSize, maxMsg), 0)))
	g, err := c.s.laneBudget.take(c.laneSource(), laneBytes(side.Config), grantLane)
	if err != nil {
		return nil, c.refuseBudget(a.Function, err)
	}
	return &lane{fn: a.Function, m: m, side: side, tr: tr, stop: make(chan struct{}), numa: numa, grant: g, peerWin: h.Windows,
		in:  c.s.met.bytesIn.WithLabelValues(transportNames[tr]),
		out: c.s.met.bytesOut.WithLabelValues(transportNames[tr])}, nil
}

// refuseBudget answers an attach that a budget does not allow: the client
// carries the calls over TCP (or, insisting on the transport, fails with
// this message).
func (c *conn) refuseBudget(fn string, err error) *proto.ApplicationException {
	c.s.met.rejected.WithLabelValues("lane_budget").Inc()
	c.s.log.Debug("hatrpc: lane refused", "remote", c.remote, "function", fn, "err", err)
	return proto.NewApplicationException(proto.ExcUnsupportedClientType, "hatrpc: "+err.Error())
}

// checkPlans checks the client's plans against the server's own before any
// call: the first function whose lane would be refused, and why.
func (s *Server) checkPlans(h *wire.Hello, caps uint64) (string, string) {
	for _, a := range h.Plans {
		ct, err := hints.ParseTransport(a.ClientTransport)
		if err != nil {
			ct = hints.TransportAuto
		}
		// The transport the client will pick for the function.
		lane := fastpath.PickTransport(ct, caps)
		if lane == hints.TransportTCP {
			continue // pinned to TCP, or no lane granted
		}
		var set hints.Set
		if m := s.lookup([]byte(a.Function)); m != nil {
			set = m.set
		}
		var pe *fastpath.PlanError
		if err := fastpath.CheckPair(a.Function, lane, ct, set); errors.As(err, &pe) {
			return pe.Function, pe.Reason
		}
	}
	return "", ""
}

// serve runs a granted lane until the client goes, the server closes,
// or a drain finds it idle; then the connection ends as any other, and
// what the lane held of the budgets is given back.
func (ls *laneSession) serve() {
	c, l := ls.c, ls.l
	defer c.readFailed(io.EOF)
	defer l.grant.release()
	c.s.budget.markFastPath(c)
	// The lane is uncounted only once its endpoint is closed (deferred
	// before it, so run after): a lanes gauge at 0 means its buffers are
	// freed and zeroed, not about to be.
	uncount := func() {}
	defer func() { uncount() }()
	d := c.s.device(c.localAddr(), l.numa)
	if d == nil {
		return
	}
	if l.viaFLOCK {
		c.w.Wait() // the hello reply goes out before the bootstrap bytes
		ls.serveFlock(d)
		return
	}
	// The numa hint pins this goroutine's thread, the lane's poller, to
	// the node before the endpoint's buffers are first touched.
	np := fastpath.PlanNUMA(l.numa, d)
	if _, seen := c.s.notes.LoadOrStore(np.Note, true); np.Note != "" && !seen {
		c.s.log.Info("hatrpc: "+np.Note, "function", l.fn)
	}
	restore, err := np.Bind()
	if err != nil {
		c.s.log.Warn("hatrpc: numa binding failed", "function", l.fn, "err", err)
	}
	defer restore()
	pd, err := d.AllocPD()
	if err != nil {
		c.s.log.Warn("hatrpc: lane setup failed", "remote", c.remote, "function", l.fn, "err", err)
		return
	}
	defer pd.Close()
	ep, err := rdma.NewRPCEndpoint(pd, l.side.Config)
	if err != nil {
		c.s.log.Warn("hatrpc: lane setup failed", "remote", c.remote, "function", l.fn, "err", err)
		return
	}
	defer ep.Close()
	c.w.Wait() // the hello reply goes out before the bootstrap bytes
	if c.w.Err() != nil {
		return
	}
	bctx, cancel := context.WithTimeout(c.ctx, c.s.laneBudget.lim.SetupTimeout)
	err = ep.Bootstrap(bctx, wire.BufConn(c.nc, c.br))
	cancel()
	if err != nil {
		c.s.log.Info("hatrpc: lane bootstrap failed", "remote", c.remote, "function", l.fn, "err", err)
		return
	}
	l.grant.ready()
	switch l.side.Polling {
	case hints.PollAdaptive:
		defer fastpath.RegisterAdaptive(ep)()
	case hints.PollBusy:
		defer fastpath.RegisterBusy(ep)()
	}
	// The lane counts as waiting (for the adaptive poller) while it is in
	// C: everything but its calls.
	defer fastpath.CountWaits(ep)()
	l.ep = ep
	ls.codec = wire.GetCodec()
	defer func() { wire.PutCodec(ls.codec) }() // no call runs once ServeCalls returned (call may swap it)
	ls.cancels = make(chan struct{}, 1)
	var cancels func(uint32)
	if l.linkCancel {
		cancels = ls.noteCancel
	}
	l.link = fastpath.WatchCancels(c.nc, nil, cancels, func() {
		c.cancel()
		ep.Abort()
	})
	defer l.link.Close()
	uncount = ls.run()
	// After ServeCalls (no request runs then): a client gone mid-stream
	// leaves no way into its stream, and the stream this lane's client
	// frames went to is reset.
	defer ls.unjoin(streamcore.ErrLaneGone)
	defer ls.dropJoin()
	l.meter = c.s.laneMeters.add(l.tr, laneEngine{m: l.m, sent: ep.SentByProtocol, blocked: ep.WaitsBlocked,
		parked: ep.ParkedWaits, parking: ep.Parking})
	defer c.s.laneMeters.retire(l.meter) // after ServeCalls: no call is counted any more
	defer ls.endRoom()                   // a reply the lane ended with, never sent
	defer ls.reclaimNext()               // before ep.Close: the lease is the endpoint's memory
	err = ep.ServeCalls(c.ctx, l.stop, ls.call, rdma.AfterReply(ls.afterReply), rdma.TimeArrivals())
	if err != nil && c.ctx.Err() == nil {
		c.s.log.Info("hatrpc: lane closed", "remote", c.remote, "function", l.fn, "err", err)
	}
}

// run publishes a bootstrapped lane (a drain that came first stops it
// at once) and counts it; the returned function uncounts it.
func (ls *laneSession) run() (done func()) {
	c := ls.c
	c.mu.Lock()
	ls.up = true
	draining := c.draining
	c.mu.Unlock()
	if draining {
		ls.stop()
	}
	c.s.met.lanes.Inc()
	return c.s.met.lanes.Dec
}

// stop tells the client to stop starting calls on the lane and lets the
// lane end at its next idle moment; c.mu is not held.
func (ls *laneSession) stop() {
	c, l := ls.c, ls.l
	c.mu.Lock()
	up := ls.up
	c.mu.Unlock()
	if !up {
		return
	}
	select {
	case <-l.stop:
		return
	default:
	}
	_ = l.link.SendGoAway()
	close(l.stop)
}

// call runs one request that arrived on the lane and returns the reply
// frame and the protocol to send it by. req is the engine's lease, valid
// until the reply is sent: everything kept is copied out by the decoder.
func (ls *laneSession) call(req []byte) ([]byte, rdma.Protocol) {
	l := ls.l
	if ls.joined != nil || len(req) > 4 && wire.Kind(req[4]) == wire.KindStreamJoin {
		if k := wire.Kind(req[4]); k == wire.KindStreamJoin || k >= wire.KindStreamData && k <= wire.KindStreamReset {
			return ls.joinedCall(req)
		}
		ls.unjoin(nil) // its stream is over: the lane moves on
	}
	if ls.stream.out != nil || len(req) > 4 && wire.Kind(req[4]) == wire.KindStreamOpen {
		return ls.streamCall(req)
	}
	if l.meter == nil {
		l.in.Add(float64(len(req)))
		return ls.callFrame(req, nil)
	}
	// A dedicated lane: a call that runs its handler is counted by the
	// lane's meter (metered), the rare others (errors, oneway, busy,
	// batches) on the families' children.
	ls.metered = false
	out, pr := ls.callFrame(req, nil)
	if !ls.metered {
		l.in.Add(float64(len(req)))
	}
	return out, pr
}

// callFLOCK runs a request of the FLOCK session, its reply encoded into
// dst if that is large enough (FLOCK's storage for the response, reused
// once the reply is posted).
func (ls *laneSession) callFLOCK(req, dst []byte) []byte {
	ls.l.in.Add(float64(len(req)))
	out, _ := ls.callFrame(req, dst)
	return ls.admitFlockReply(req, out)
}

// callFrame runs one request frame; dst is where the FLOCK session's reply
// goes (nil: a fresh buffer; a dedicated lane's has its own).
func (ls *laneSession) callFrame(req, dst []byte) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	lim := &c.s.opts.limits
	if len(req) > 4 && wire.Kind(req[4]) == wire.KindBatch && !l.viaFLOCK {
		return ls.batch(req)
	}
	// The call starts when the engine took the request in: its latency
	// and deadline count from there, with no clock read here.
	at := ls.arrived()
	if m, timeout, ok := ls.knownHead(req, lim.MaxMessageSize); ok {
		k := &ls.head
		var r request
		r.m, r.body, r.proto, r.seqid, r.at, r.dst = m, req[wire.HeaderSize+k.body:], k.p, k.seqid, at, dst
		return ls.callMethod(&r, req, wire.HeaderSize, timeout)
	}
	off := wire.HeaderSize
	var sc *metadata.ServerCall
	h, err := wire.DecodeHeader(req, lim.MaxMessageSize)
	if err == nil && (h.Kind != wire.KindCall && h.Kind != wire.KindOneway || h.PayloadLen() != len(req)-wire.HeaderSize) {
		err = fmt.Errorf("%w: lane frame kind %d, %d of %d payload bytes", wire.ErrBadFrame, h.Kind, len(req)-wire.HeaderSize, h.PayloadLen())
	}
	if err == nil && h.Flags&wire.FlagHeaders != 0 {
		sc, off, err = laneHeaders(req)
	}
	var mh wire.MsgHeader
	if err == nil {
		mh, err = wire.ParseMsgHeader(h.Protocol(), req[off:])
	}
	if err != nil {
		return ls.reply(&replyTo{dst: dst, proto: h.Protocol(), seqid: h.Seqid}, proto.Exception,
			proto.NewApplicationException(proto.ExcProtocolError, err.Error()), nil, 0, nil)
	}
	m := ls.lookup(mh.Name)
	ls.learnHead(req, h, mh, m)
	p := h.Protocol()
	oneway := h.Kind == wire.KindOneway || mh.Type == proto.Oneway
	if m == nil {
		if oneway {
			return nil, l.side.Protocol(0)
		}
		name := string(mh.Name)
		return ls.reply(&replyTo{dst: dst, proto: p, name: name, seqid: mh.Seqid}, proto.Exception,
			proto.NewApplicationException(proto.ExcUnknownMethod, "unknown method "+name), nil, 0, nil)
	}
	var r request
	r.m, r.body, r.proto, r.seqid, r.at, r.dst = m, req[off+mh.Body:], p, mh.Seqid, at, dst
	r.oneway, r.sc = oneway, sc
	return ls.callMethod(&r, req, off, h.Timeout)
}

// callMethod runs a decoded call r of r.m, its head (method, body,
// protocol, seqid, start, reply storage; oneway and headers if any) set
// by the caller; its message (past the frame header and call headers)
// starts at off of req. r is the caller's, on its stack, filled field by
// field, never copied or returned whole: a struct copied whole is stored
// field by field and read back 16 bytes at a time, and each such read
// waits for the stores (a stalled store forward, ~5 ns each on this
// path).
func (ls *laneSession) callMethod(r *request, req []byte, off int, timeout time.Duration) ([]byte, rdma.Protocol) {
	c, l, m, at := ls.c, ls.l, r.m, r.at // at: acquireSlot may reset r.at
	if ht := m.timeout; ht > 0 && (timeout == 0 || ht < timeout) {
		timeout = ht
	}
	// The request lives on the stack (no allocation, no write barriers)
	// unless it must outlive this call: see callPooled. Its body is the
	// lease, valid until the reply this function returns is sent (a
	// FLOCK session's: FLOCK keeps the ring slot, or a worker's copy, until
	// the handler registered in flockServer returns), so borrowed
	// arguments may alias it.
	r.oneway = r.oneway || m.m.Oneway
	r.hat, r.name, r.size, r.tr, r.lease = true, m.m.Name, len(req)-off, l.tr, true
	switch {
	case l.viaFLOCK:
		r.ctx = ls.flockCtxs.next(c.ctx, deadlineAt(at, timeout))
	case m.bctx && !r.oneway:
		r.ctx = ls.borrowedCtx(c.ctx, deadlineAt(at, timeout))
	default:
		r.ctx = ls.ctxs.next(c.ctx, deadlineAt(at, timeout))
	}
	cc := r.ctx
	if r.sc != nil {
		r.ctx.sc.Store(r.sc)
	}
	if r.oneway || l.viaFLOCK {
		return ls.callPooled(r)
	}
	if !ls.acquireSlot(r) {
		out, pr := ls.busy(r)
		c.clearRequest(r)
		return out, pr
	}
	// A lane runs one call at a time: its codec is the session's own.
	codec := ls.codec
	if codec == nil {
		codec = wire.GetCodec()
		defer wire.PutCodec(codec)
	}
	if ls.next.m == m {
		r.args, r.call = ls.next.args, ls.next.call
		ls.next.m, ls.next.args, ls.next.call = nil, nil, nil
	}
	if l.meter != nil {
		r.meter, r.frame = l.meter, len(req)
		ls.metered = true
	}
	lim := ls.batchLim
	if !ls.inBatch {
		lim = ls.maxReplyBody()
	}
	ls.openRoom(r.ctx, lim)
	st, typ, body := c.execute(r, codec)
	md, call := replyMD(r), r.call
	out, pr := ls.encodeReply(&r.replyTo, typ, body, codec, m.set.PayloadSize, md)
	if !ls.inBatch {
		ls.admitLaneReply(len(out)) // a batch charges its frame (batch)
	}
	if codec == ls.codec && ls.buf == nil {
		// The codec still points at the reply's buffer, which the
		// session let go as too large: a fresh codec lets it go too (it
		// holds nothing else of the Go heap: requests are leases).
		wire.PutCodec(codec)
		ls.codec = wire.GetCodec()
	}
	// What is left (the end of the call's context and slot, its outcome,
	// the meter's end with the end-of-call clock read, the call value's
	// reset) runs in afterReply: on a spinning lane once the reply is on
	// its way, off the client's wait. r holds no buffer or budget (its
	// body is the lease), only its live context.
	e := &ls.end
	e.m, e.call = m, nil
	if call != nil && len(c.s.opts.interceptors) == 0 {
		// The reply is encoded: nothing uses the call value any more
		// (interceptors, which might keep its arguments or result, get
		// fresh ones).
		e.call = call
	}
	if r.meter != nil {
		e.metered, e.st, e.at, e.ctx, e.res, e.err = true, st, at, r.ctx, r.res, r.err
		e.rep, e.frame, e.pr = len(out)-wire.HeaderSize, len(out), pr
	} else { // no lane meter: execute ended the call, and its reply is counted now
		c.clearRequest(r)
		if m.bctx {
			ls.keepCtx(cc)
		}
		c.s.slots.release()
		l.out.Add(float64(len(out)))
		st.cell(c.shard).repBytes.Add(uint64(len(out) - wire.HeaderSize))
		c.s.laneReplied(m, pr)
	}
	if ls.inBatch {
		ls.afterReply() // a batch's calls end one after another in one reply
	}
	return out, pr
}

// engineProtocolName names engine protocol i as lane_replies_total does;
// replyFLOCK is "flock".
func engineProtocolName(i int) string {
	if i == replyFLOCK {
		return "flock"
	}
	return rdma.Protocol(i).String()
}

// arrived is when the engine took the lane's request in, since epoch; a
// FLOCK call (FLOCK hands calls over) or an engine time that does not fit
// reads the clock.
func (ls *laneSession) arrived() time.Duration {
	if ep := ls.l.ep; ep != nil && !ls.l.viaFLOCK && !ls.inBatch {
		if t := time.Duration(ep.Arrived() - engineEpoch().off); t > 0 {
			return t
		}
	}
	return time.Since(epoch)
}

// clockOffset is epoch on the engine's clock (rdma.MonotonicNow), within
// ±err ns.
type clockOffset struct{ off, err int64 }

// engineEpoch finds epoch on the engine's clock. Go's monotonic clock is
// the same CLOCK_MONOTONIC, so the two differ by a constant; it is
// bracketed between two readings of time.Since(epoch), and the tightest of
// a few brackets (a cgo crossing wide, ~50 ns) is kept.
var engineEpoch = sync.OnceValue(func() clockOffset {
	best, off := time.Duration(1<<62), int64(0)
	for range 16 {
		g1 := time.Since(epoch)
		c := rdma.MonotonicNow()
		g2 := time.Since(epoch)
		if w := g2 - g1; w < best {
			best, off = w, c-int64(g1+w/2)
		}
	}
	return clockOffset{off: off, err: int64(best/2) + 1}
})

// acquire takes a call slot for r and counts the call in flight on the
// connection; false if no slot came in time.
func (ls *laneSession) acquire(r *request) bool {
	if !ls.acquireSlot(r) {
		return false
	}
	ls.c.begin()
	return true
}

// acquireSlot takes a call slot for r, a dedicated lane's two-way call,
// which runs on this goroutine before its reply goes out: false if none
// came in time. Unlike acquire, it does not count the call in flight on
// the connection and the server (begin; end, at the call's end): those
// counts keep a connection open (maybeFinish) and Shutdown waiting
// (callWG) while calls run, and the lane's connection can neither finish
// nor leave the server's connWG, which Shutdown waits for first, before
// this goroutine returns from serving it. The two counts were four of the
// call's atomic read-modify-writes, each a full barrier right after the
// request's lines came over from the client's core: ~50 ns of a 64 B call
// in place (docs/performance/history.md, "Kept changes, in order").
func (ls *laneSession) acquireSlot(r *request) bool {
	if ls.c.s.slots.tryAcquire() {
		return true
	}
	if !ls.c.acquireSlot() {
		return false
	}
	r.at = 0 // it waited: the handler's latency starts now
	return true
}

// busy answers a call no slot came for (a oneway call: nothing).
func (ls *laneSession) busy(r *request) ([]byte, rdma.Protocol) {
	if r.oneway {
		return nil, ls.l.side.Protocol(0)
	}
	return ls.reply(&r.replyTo, proto.Exception,
		proto.NewApplicationException(proto.ExcInternalError, "server busy"), nil, 0, ls.c.busyMD(r))
}

// callPooled runs a call whose request must live on the heap: a oneway
// call, whose handler runs on after the acknowledgement, or a FLOCK
// call, which may run beside others.
func (ls *laneSession) callPooled(sr *request) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	r := reqPool.Get().(*request)
	*r = *sr
	if !ls.acquire(r) {
		c.freeRequest(r)
		return ls.busy(sr)
	}
	if r.oneway {
		// The client only waits for the request to be taken; its handler
		// runs on after the acknowledgement, off the lease: on a copy of
		// the call's own, which borrowed arguments may alias for as long
		// as they like.
		r.body = append([]byte(nil), r.body...)
		go func() {
			codec := wire.GetCodec()
			c.execute(r, codec)
			wire.PutCodec(codec)
			c.freeRequest(r)
			c.s.slots.release()
			c.end()
		}()
		return nil, l.side.Protocol(0)
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	c.takeCall(r)
	// Its handler may reserve its reply (ReserveReply) within the
	// session's share and maximum, held until the call ends.
	r.ctx.rq, r.conn, r.replyMax = r, c, ls.maxReplyBody()
	m := r.m
	st, typ, body := c.execute(r, codec)
	md, call := replyMD(r), r.call
	c.freeRequest(r)
	c.s.slots.release()
	c.end()
	out, pr := ls.reply(&sr.replyTo, typ, body, codec, m.set.PayloadSize, md) // sr's head is r's, and r is freed
	c.putCall(m, call)                                                        // the reply is encoded
	st.cell(c.shard).repBytes.Add(uint64(len(out) - wire.HeaderSize))
	counted := pr
	if l.viaFLOCK {
		counted = rdma.Protocol(replyFLOCK) // FLOCK sends it, not an engine protocol
	}
	c.s.laneReplied(m, counted)
	return out, pr
}

// lookup finds the method a call names, through the lane's cache (not
// for the FLOCK session, whose calls run concurrently).
func (ls *laneSession) lookup(name []byte) *method {
	if ls.l.viaFLOCK {
		return ls.c.s.lookup(name)
	}
	return ls.mc.find(ls.c.s, name)
}

// laneReplied counts a lane reply of m by its engine protocol, or
// replyFLOCK; the metric children are made on first use.
func (s *Server) laneReplied(m *method, pr rdma.Protocol) {
	i := min(int(pr), replyFLOCK)
	p := &m.replies[i]
	ctr := p.Load()
	if ctr == nil {
		c := s.met.laneReplies.WithLabelValues(m.svc, m.m.Name, engineProtocolName(i))
		p.CompareAndSwap(nil, &c)
		ctr = p.Load()
	}
	(*ctr).Inc()
}

// reply encodes one reply frame to to into the lane's reply buffer (a
// FLOCK call's: into to.dst, see callFLOCK), with the handler's reply
// headers md if any; hint is the method's declared reply size.
func (ls *laneSession) reply(to *replyTo, typ proto.MessageType, body proto.Struct, codec *wire.Codec, hint int, md metadata.MD) ([]byte, rdma.Protocol) {
	b, pr := ls.encodeReply(to, typ, body, codec, hint, md)
	ls.l.out.Add(float64(len(b)))
	return b, pr
}

// encodeReply is reply without counting the frame in bytes_out_total.
func (ls *laneSession) encodeReply(to *replyTo, typ proto.MessageType, body proto.Struct, codec *wire.Codec, hint int, md metadata.MD) ([]byte, rdma.Protocol) {
	if codec == nil {
		codec = wire.GetCodec()
		defer wire.PutCodec(codec)
	}
	l := ls.l
	buf, leased := ls.buf, false
	guess := max(hint, int(l.maxReply.Load()))
	switch {
	case l.viaFLOCK:
		// FLOCK's replies are coalesced later, so each has storage
		// of its own: FLOCK's (dst), kept with the response and reused once
		// it is posted, or, too small, a buffer sized for the declared
		// reply (no regrowth copies), which FLOCK then keeps.
		if want := min(max(512, hint+wire.HeaderSize+256), 1<<20); cap(to.dst) >= want {
			buf = to.dst[:0]
		} else {
			buf = make([]byte, 0, want)
		}
	case guess >= leaseMin && l.ep != nil:
		// A large reply is encoded straight into the engine's registered
		// buffer (staging, or the RFP response buffer when the client
		// fetches): the engine then sends it without a copy.
		if lease := l.ep.ReplyBuffer(guess + guess/4 + 4<<10); lease != nil {
			buf, leased = lease[:0], true
		}
	}
	if cap(buf) < wire.HeaderSize {
		buf = make([]byte, 0, 4<<10)
	}
	head, hflag := buf[:wire.HeaderSize], uint8(0)
	if len(md) > 0 {
		head, hflag = wire.AppendHeaderBlock(head, md), wire.FlagHeaders
	}
	pre, room := len(head)-wire.HeaderSize, ls.replyRoom() // the header block counts
	// A lane's reply is binary or compact: its size is counted whole.
	b, typ, size, _ := appendReply(codec, head, to, typ, body, room-pre)
	if exc := ls.refusal(pre+size, room); exc != nil {
		b, typ, hflag = appendRefused(codec, buf[:wire.HeaderSize], to, exc, ls.maxReplyBody(), true), proto.Exception, 0
	}
	sealReplyRefs(b, nil, to.proto, to.seqid, typ, hflag)
	// Keep a grown buffer for the next reply, but not a huge one forever.
	switch {
	case l.viaFLOCK, leased && cap(b) == cap(buf): // the lease is the engine's, not ours to keep
	case cap(b) <= laneBufKeep:
		ls.buf = b[:0]
	default:
		ls.buf = nil
	}
	if n := int64(len(b)); n > l.maxReply.Load() {
		l.maxReply.Store(n)
	}
	return b, l.side.Protocol(len(b))
}

const laneBufKeep = 1 << 20

// leaseMin is the reply size from which encoding into the engine's buffer
// (saving a copy) pays for the extra cgo crossing.
const leaseMin = 16 << 10

// laneBytes estimates the registered memory of an endpoint built from cfg:
// its pre-known and response buffers, the eager slots both ways and the
// rendezvous pool.
func laneBytes(cfg rdma.EndpointConfig) int64 {
	return int64(cfg.DirectSize) + int64(cfg.RespSize) + 2*int64(cfg.Slots)*int64(cfg.SlotSize) + int64(cfg.PoolSize)
}
