package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// conn is one client connection. Exactly one goroutine at a time holds the
// read role (the fields marked reader-owned); calls run on other pool
// goroutines and only meet in the mutex-guarded part.
type conn struct {
	s      *Server
	nc     net.Conn
	br     *bufio.Reader
	raw    *meter           // under br, over spin (or nc)
	spin   *wire.SpinReader // nil unless nc is a plain socket
	w      *wire.Writer
	remote string
	ctx    context.Context
	cancel context.CancelFunc

	// reader-owned
	started bool
	format  wire.Format
	hat     bool
	headers bool // the HatRPC client was granted CapHeaders: it reads reply header blocks
	nextIn  uint64
	thCur   *thCall // THeader: the message just read (see theader.go)
	turnIn  uint64  // next plain call's turn to run (order.go)
	zlib    bool    // Apache's TZlibTransport: br inflates, w deflates (zlib.go)
	grown   bool    // br is the big read buffer (readbuf.go)
	mc      methodCache
	peeked  wire.Header // the next frame's, when nextBuffered found it whole

	upgraded atomic.Bool // mirrors hat for goroutines without the read role

	serveHook func() // tests of the worker pool replace serve with this
	// inline is the episode number of the call running inline with the
	// read role parked (0: someone reads). Episodes are unique, so a
	// goroutine whose role was taken away cannot reclaim a later one's.
	inline    atomic.Uint64
	inlineAt  atomic.Int64 // when the inline call started (since epoch)
	armed     atomic.Bool  // the handoff timer is pending
	holding   atomic.Bool  // the reader holds the writer (see Writer.Hold)
	slow      bool         // reader-owned: the last inline call was not quick
	episode   uint64       // reader-owned counter
	handoff   *time.Timer  // see armHandoff
	writeFail sync.Once
	wrFailed  atomic.Bool // a write failed: no reply can reach the client

	mu       sync.Mutex
	nextOut  uint64             // next plain reply to write (Thrift clients expect order)
	held     map[uint64]*[]byte // plain replies finished ahead of their turn
	th       map[uint64]*thCall // THeader requests by reply order
	inflight atomic.Int64       // calls begun and not ended (c.mu not needed)
	// shard: which shard of the call metrics its calls and bytes count in
	// (callmeter.go), so connections do not share those lines.
	shard uint32
	turn  turns // plain calls run one at a time, in order (order.go)
	// pseudo: the FLOCK pseudo-connection, which never finishes (the
	// server's Close ends its calls): only the server counts its calls, so
	// its workers do not all take this conn's mutex twice a call.
	pseudo    bool
	draining  bool
	drainFlag atomic.Bool // draining, for the reader to look at without c.mu
	readDone  bool
	readEnded atomic.Bool // readDone, for end to look at without c.mu
	finished  bool
	lingers   bool // closing after bad input: let the error reply arrive
	// fp is the fast-path session the connection became (or is
	// becoming): a lane or a FLOCK handle's link, set by the hello.
	fp *laneSession
	// st: the connection's streams, when the hello granted them (stream.go).
	st *streamcore.Conn
	// sw: where its stream frames go: the connection's writer, or a
	// lane's outbox (stream_lane.go).
	sw streamWriter

	timeoutFields
	chargeFn wire.Charge             // c.charge, made once
	charging int64                   // reader-owned: budget charged for the message being read
	rg       replyGate               // reply memory (replygate.go)
	ctxs     ctxSlab                 // reader-owned: its calls' contexts
	scs      metadata.ServerCallSlab // reader-owned: its calls' headers
	calls    cancelTable             // reader-owned: HatRPC calls in flight, for Cancel frames
	memHeld  int64                   // budget held by the connection's requests and replies; guarded by budget.mu
	fastPath atomic.Bool             // it became a lane or FLOCK session: its memory counts in budget.fastPath
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	sr := wire.NewSpinReader(nc)
	w := wire.NewWriter(nc, nil)
	w.SetTimeout(s.opts.writeTimeout)
	c := &conn{
		s: s, nc: nc, ctx: ctx, cancel: cancel, w: w,
		spin:   sr,
		remote: nc.RemoteAddr().String(),
		held:   map[uint64]*[]byte{},
		shard:  s.connSeq.Add(1),
	}
	c.raw = &meter{c: c, r: sr.Reader(nc)}
	c.br = bufio.NewReaderSize(c.raw, readBufSize)
	c.chargeFn = c.charge
	c.since.Store(s.clock.Load()) // the handshake phase starts now
	// Created before any reader exists so the field is never written
	// while a timer callback could read it.
	c.handoff = time.AfterFunc(time.Hour, c.timedHandoff)
	c.handoff.Stop()
	return c
}

// Transport label indexes of method.stats and transportNames: the
// transport registry's rows (pkg/internal/transport; row 0 is TCP), then
// plain Apache Thrift over TCP, which is a label of its own.
const (
	trTCP         = uint8(transport.TCP)
	trThrift      = uint8(transport.Count)
	numTransports = transport.Count + 1
)

var transportNames = func() (n [numTransports]string) {
	for i := range transport.Transports {
		n[i] = transport.Transports[i].Name()
	}
	n[trThrift] = TransportThrift
	return n
}()

// trOf is the label index of hint h's transport: its registry row.
func trOf(h hints.Transport) uint8 {
	i, _ := transport.Index(h)
	return uint8(i)
}

// eagerStats reports whether label tr gets its metric children when a
// method is registered: TCP and Thrift, which every server serves; lane
// transports get theirs on first use, so a server shows only the
// transports it really serves.
func eagerStats(tr uint8) bool { return tr == trThrift || !transport.Transports[tr].Lanes() }

// serve reads until it has a call to run, hands the read role to another
// pool goroutine and runs the call itself.
func (c *conn) serve() {
	if c.serveHook != nil {
		c.serveHook()
		return
	}
	var k kit
	defer k.done()
	for {
		// Looked at once a message: the header decode and the buffer's
		// peek were three a call of a pipelined burst (this test, the
		// phase's in next, the frame read's own).
		whole := c.nextBuffered()
		if c.holding.Load() && !whole {
			c.unhold() // about to wait for the client: send what is held
		}
		if !c.hat && c.turnIn-c.turn.ran.Load() >= plainAhead {
			c.unhold() // the calls ahead's replies go out while it waits
			c.turn.awaitAhead(&c.mu, c.turnIn)
		}
		c.growRead()
		r, err := c.next(&k, whole)
		k.ended = 0
		if err == errAttached {
			c.unhold()
			c.fp.serve()
			return
		}
		if err != nil {
			c.unhold()
			c.readFailed(err)
			return
		}
		if r == nil {
			continue
		}
		if c.holding.Load() && c.s.slots.full() {
			c.unhold() // waiting for a slot must not keep replies back
		}
		if !c.reserveReply(r) { // replygate.go: answered busy, or the connection ended
			c.unhold()
			c.freeRequest(r)
			continue
		}
		if !c.acquire(r) {
			continue
		}
		if !c.hat {
			c.takeTurn(r)
		}
		if r.at == 0 {
			r.at = time.Since(epoch) // it waited: the handler's time starts now
		}
		at := r.at
		more := c.br.Buffered() > 0
		if r.size >= inlineMaxSize || more && c.hat && c.slow {
			// More calls are here and calls are not quick, or this one
			// costs more than a handoff: read on in another goroutine
			// while this one runs the call, so they run concurrently
			// (a plain connection's calls still run one after the
			// other: only their reading overlaps).
			c.unhold()
			c.s.pool.run(c)
			c.handle(r, &k)
			return
		}
		if more && !c.holding.Load() {
			// A burst of quick pipelined calls: run them one after the
			// other here, without a handoff each, and send their replies
			// together once the burst is read.
			c.w.Hold()
			c.holding.Store(true)
		}
		// Run the call inline, as a plain request/response server would,
		// and keep the read role. Should the handler take longer than
		// inlineBudget, the timer hands the read role on so later calls,
		// Cancel frames and a vanishing client are still seen.
		c.episode++
		ep := c.episode
		c.inlineAt.Store(int64(at))
		c.inline.Store(ep)
		c.armHandoff()
		end := c.handle(r, &k)
		slow := more && end-at > quickCall
		if !c.inline.CompareAndSwap(ep, 0) {
			c.unhold()
			return // the timer moved the read role on
		}
		c.slow = slow
		k.ended = end
		if !more && c.br.Buffered() == 0 && c.s.slots.inUse() == 0 {
			// A lone call answered and no other call runs: its client
			// is likely to send the next one right away, and polling
			// takes no CPU from other calls (see wire.SpinReader).
			c.spin.Arm()
		}
	}
}

// quickCall is how long an inline call may take for the next buffered
// call to run inline too: beyond it the calls of a burst go to separate
// goroutines (and cores).
const quickCall = 20 * time.Microsecond

// nextBuffered tells whether the next HatRPC frame is buffered whole, so
// reading it cannot wait for the client; its header is then c.peeked,
// for next to take the frame without decoding the header again.
func (c *conn) nextBuffered() bool {
	n := c.br.Buffered()
	if !c.hat || n < wire.HeaderSize {
		return false
	}
	hb, _ := c.br.Peek(wire.HeaderSize) // buffered: cannot fail
	h, err := wire.DecodeHeader(hb, c.s.opts.limits.MaxMessageSize)
	c.peeked = h
	return err == nil && n >= wire.HeaderSize+h.PayloadLen()
}

// unhold ends the reader's Hold on the writer, if it has one; the timer
// may end it first when it takes the read role away.
func (c *conn) unhold() {
	if c.holding.CompareAndSwap(true, false) {
		c.checkWrite(c.w.Release())
	}
}

var epoch = time.Now()

// inlineMaxSize is the request size from which a call never runs inline:
// copying the payload costs several handoffs, and a client pipelining large
// calls would otherwise find the server working on one core.
const inlineMaxSize = 16 << 10

// inlineBudget is how long a call may run inline before reading moves to
// another goroutine: far above a fast handler, far below anything a
// pipelining client would notice.
const inlineBudget = 50 * time.Microsecond

// armHandoff makes sure the timer will look at the inline call within
// inlineBudget. The timer is left running between calls rather than reset
// and stopped around each one: back-to-back calls then cost one timer
// update per budget period instead of two per call.
func (c *conn) armHandoff() {
	if !c.armed.Load() {
		c.armed.Store(true)
		c.handoff.Reset(inlineBudget)
	}
}

// timedHandoff runs on the timer: if an inline call has been running for
// inlineBudget, the read role goes to a pool goroutine; if a younger one
// runs, the timer is set for the rest of its budget.
func (c *conn) timedHandoff() {
	c.armed.Store(false)
	ep := c.inline.Load()
	if ep == 0 {
		return
	}
	if left := inlineBudget - (time.Since(epoch) - time.Duration(c.inlineAt.Load())); left > 0 {
		c.armed.Store(true)
		c.handoff.Reset(left)
		return
	}
	if c.inline.CompareAndSwap(ep, 0) {
		c.unhold() // a slow call must not keep earlier replies back
		c.s.pool.run(c)
	}
}

// next reads one message; whole says the next frame is buffered whole
// (nextBuffered). It returns (nil, nil) for messages it fully handled
// itself: control frames, the handshake, unknown methods.
func (c *conn) next(k *kit, whole bool) (*request, error) {
	if c.drainFlag.Load() {
		return nil, errDraining
	}
	if c.wrFailed.Load() {
		// The calls still in the read buffer (16 KiB of small calls is
		// hundreds) would each build a reply nobody can receive: 8
		// closed getCounters floods took a server to 740 MB that way.
		return nil, errWriteFailed
	}
	c.atBoundary(whole)
	first := !c.started
	if first {
		if c.startsHTTP() {
			return nil, c.serveHTTP() // http.go
		}
		if err := c.startZlib(); err != nil {
			return nil, err
		}
		f, err := wire.Detect(c.br)
		if err != nil {
			return nil, err
		}
		c.format, c.started = f, true
	}
	lim := &c.s.opts.limits
	bp := k.takeIn()
	var (
		msg     []byte
		p       proto.Protocol
		timeout time.Duration
		fseq    int32
		err     error
		sc      *metadata.ServerCall
		rid     [wire.RequestIDSize]byte
		hasRID  bool
	)
	if c.hat {
		var h wire.Header
		var b []byte
		if whole {
			h = c.peeked
			b, err = wire.TakeFrame(c.br, &h, *bp, c.chargeFn)
		} else {
			h, b, err = wire.ReadFrameCharged(c.br, c.raw, *bp, lim.MaxMessageSize, c.chargeFn)
		}
		*bp = b
		if err != nil {
			wire.PutBuf(bp)
			c.releaseCharge()
			if c.overBudget(err, &h) {
				return nil, nil
			}
			if wire.IsTooLarge(err) {
				c.fatalReply(&replyTo{hat: true, proto: h.Protocol(), seqid: h.Seqid, fseq: h.Seqid}, err)
			}
			return nil, err
		}
		c.s.met.io(c.shard).in[ioTCP].Add(uint64(len(b)))
		switch h.Kind {
		case wire.KindCancel:
			wire.PutBuf(bp)
			c.cancelCall(h.Seqid)
			return nil, nil
		case wire.KindCall, wire.KindOneway:
		case wire.KindStreamOpen, wire.KindStreamData, wire.KindStreamWindow, wire.KindStreamEnd, wire.KindStreamReset:
			return nil, c.streamFrame(&h, bp) // stream.go
		default:
			wire.PutBuf(bp)
			c.releaseCharge()
			return nil, fmt.Errorf("%w: unexpected frame kind %d from client", wire.ErrBadFrame, h.Kind)
		}
		msg, p, timeout, fseq = b[wire.HeaderSize:], h.Protocol(), h.Timeout, h.Seqid
		if h.Flags&wire.FlagHeaders != 0 {
			n, herr := wire.HeaderBlockLen(msg)
			if herr != nil {
				wire.PutBuf(bp)
				c.releaseCharge()
				return nil, herr
			}
			// Decoded only if the handler looks (most never do); a
			// request id alone is kept as its bytes (callCtx.rid).
			if id, ok := wire.RequestIDOnly(msg[4:n]); ok {
				rid, hasRID = [wire.RequestIDSize]byte(id), true
			} else {
				sc = c.scs.NewLazyCopy(msg[4:n], wire.ParseKV)
			}
			msg = msg[n:]
		}
	} else {
		*bp, err = wire.ReadMessageCharged(c.br, c.format, *bp, c.firstLimits(lim, first), c.chargeFn)
		if err != nil {
			c.releaseCharge()
			if c.overBudget(err, nil) {
				return nil, nil
			}
			if errors.Is(err, proto.ErrInvalidData) {
				// The message start may still tell us whom to answer: the
				// bytes scanned so far (unframed), or for an oversized
				// frame the bytes buffered after its length.
				start := *bp
				if c.format.Framed {
					start, _ = c.br.Peek(c.br.Buffered())
				}
				if mh, herr := wire.ParseMsgHeader(c.format.Proto, start); herr == nil {
					c.fatalReply(&replyTo{proto: c.format.Proto, name: string(mh.Name), seqid: mh.Seqid}, err)
				}
			}
			wire.PutBuf(bp)
			return nil, err
		}
		msg, p = *bp, c.format.Proto
		c.s.met.io(c.shard).in[ioThrift].Add(uint64(len(msg)))
		if c.format.Header {
			if msg, p, err = c.readTHeader(msg); err != nil {
				wire.PutBuf(bp)
				c.releaseCharge()
				if err == errSkipped {
					return nil, nil
				}
				return nil, err
			}
			sc = c.thCur.sc
		}
	}
	c.busy()
	mh, err := wire.ParseMsgHeader(p, msg)
	if err == nil && mh.Type != proto.Call && mh.Type != proto.Oneway {
		err = fmt.Errorf("%w: message type %v from client", proto.ErrInvalidData, mh.Type)
	}
	if err == nil && first && c.mayHello() {
		err = c.checkFirst(p, &mh, len(msg)) // hello.go
	}
	if err != nil {
		wire.PutBuf(bp)
		c.releaseCharge()
		return nil, err
	}
	m := c.mc.find(c.s, mh.Name)
	if m == nil {
		return nil, c.notServed(p, &mh, fseq, bp, msg)
	}
	// r comes zeroed (clearRequest): set field by field, since a whole
	// literal would zero its ~300 bytes again (~100 instructions a call).
	r := k.take()
	r.replyTo = replyTo{hat: c.hat, proto: p, name: m.m.Name, seqid: mh.Seqid, fseq: fseq, mem: c.takeCharge()}
	r.m, r.buf, r.body = m, bp, msg[mh.Body:]
	r.oneway, r.timeout = mh.Type == proto.Oneway || m.m.Oneway, timeout
	r.size, r.tr, r.sc = len(msg), trThrift, sc
	if hasRID {
		r.rid, r.hasRID = rid, true
	}
	if c.hat {
		r.tr = trTCP
	}
	if !r.oneway {
		c.takeOrder(&r.replyTo)
	}
	if ht := m.timeout; ht > 0 && (timeout == 0 || ht < timeout) {
		timeout = ht
	}
	// One clock read a call gives both its deadline and, unless it waits
	// before it runs, the start of its handler's time (r.at). A call of
	// a burst, read whole from the buffer right after the call before it
	// ended inline, starts when that one ended: the clock was read then,
	// and only this parse has run since (~85 instructions a call and a
	// clock read, which a VM's vDSO makes dear).
	if r.at = k.ended; r.at == 0 || !whole {
		r.at = time.Since(epoch)
	}
	// A call with a reply has its own context, through which its
	// handler may reserve room for it (ReserveReply).
	if r.hat || timeout > 0 || !r.oneway {
		// Created (and registered for Cancel frames) by the reader, before
		// the next frame is read, so a Cancel right behind its call is
		// never missed; waiting for a slot counts against the deadline.
		var dl time.Duration
		if timeout > 0 {
			dl = deadlineAt(r.at, timeout)
		}
		r.ctx = c.ctxs.next(c.ctx, dl)
		if sc != nil {
			r.ctx.sc.Store(sc)
		}
		if hasRID {
			r.ctx.rid, r.ctx.hasRID = rid, true
		}
		if !r.oneway {
			r.ctx.rq, r.conn = r, c
		}
		if r.hat && !r.oneway {
			c.calls.add(r.fseq, r.ctx)
		}
	}
	return r, nil
}

// notServed answers a message naming no registered method: the
// handshake's hello on a plain connection (errAttached once it became a
// fast-path session), else an unknown method. Out of next, whose every
// call would otherwise pay for these defers (next has too many returns
// for them to be open-coded: ~75 instructions a call in deferreturn).
func (c *conn) notServed(p proto.Protocol, mh *wire.MsgHeader, fseq int32, bp *[]byte, msg []byte) error {
	name := string(mh.Name)
	defer wire.PutBuf(bp)
	defer c.releaseCharge()
	// A JSON connection stays plain Thrift (HatRPC framing carries
	// binary or compact): the hello is then an unknown method.
	if splitName(name) == wire.HelloMethod && !c.hat && p != proto.JSON {
		if c.hello(p, name, mh.Seqid, msg[mh.Body:]) {
			return errAttached
		}
		return nil
	}
	if mh.Type == proto.Call {
		c.replyNow(&replyTo{hat: c.hat, proto: p, name: name, seqid: mh.Seqid, fseq: fseq}, proto.Exception,
			proto.NewApplicationException(proto.ExcUnknownMethod, "unknown method "+name), nil)
	}
	return nil
}

var errDraining = errors.New("server: connection draining")

// errWriteFailed ends the read side after a failed write (checkWrite).
var errWriteFailed = fmt.Errorf("server: a reply could not be written: %w", net.ErrClosed)

// takeOrder reserves the next reply position for a plain reply to to
// (a HatRPC frame's replies go out as they finish).
func (c *conn) takeOrder(to *replyTo) {
	if to.hat {
		return
	}
	o := c.nextIn
	c.nextIn++
	if c.format.Header {
		c.noteTHeaderOrder(o)
	}
	to.order = o
}

// acquire takes a call slot, blocking the reader (and so, through TCP, the
// client) while the server is at its concurrency limit.
func (c *conn) acquire(r *request) bool {
	if c.s.slots.tryAcquire() {
		c.begin()
		return true
	}
	r.at = 0 // it may wait: the handler's time starts once it runs
	if c.acquireLane() {
		return true
	}
	if c.ctx.Err() == nil && !r.oneway {
		c.replyHinted(&r.replyTo, proto.Exception,
			proto.NewApplicationException(proto.ExcInternalError, "server busy"), nil, nil, c.busyMD(r))
	}
	c.freeRequest(r)
	return false
}

func (c *conn) begin() {
	c.s.callWG.Add(1)
	if c.pseudo {
		return
	}
	c.inflight.Add(1)
}

// handle runs one call and writes its reply. It returns when the
// handler returned (since epoch).
func (c *conn) handle(r *request, k *kit) time.Duration {
	codec := k.getCodec()
	c.takeCallKept(r, k)
	if r.ordered {
		if c.turn.ran.Load() != r.turn {
			r.at = 0 // it waits for its turn: its time starts after
		}
		c.turn.await(&c.mu, r.turn)
	}
	st, typ, body := c.execute(r, codec)
	if r.ordered {
		c.turn.done(&c.mu)
	}
	if !r.oneway {
		st.cell(c.shard).repBytes.Add(uint64(c.replyHinted(&r.replyTo, typ, body, codec, &r.m.repHint, replyMD(r))))
	}
	codec.Reset()
	c.putCallKept(r.m, r.call, k) // the reply is encoded
	end := r.end
	k.keepIn(r)       // the reply is out: nothing borrows the request's buffer
	c.clearRequest(r) // returns a larger buffer borrowed arguments used
	k.keep(r)
	c.s.slots.release()
	c.end()
	return end
}

// execute decodes the arguments, runs the handler through the interceptors
// and returns what to reply (for oneway calls nothing is sent), whatever
// the transport. The request buffer is released once decoded.
func (c *conn) execute(r *request, codec *wire.Codec) (*methodStats, proto.MessageType, proto.Struct) {
	st := c.s.statsFor(r.m, r.tr)
	var cc *callCell
	if r.meter != nil {
		r.meter.begin(r.m, r.size, r.frame)
	} else {
		cc = st.cell(c.shard)
		cc.begin(r.size)
	}
	start := r.at
	if start == 0 {
		start = time.Since(epoch) // monotonic only: half the cost of time.Now
	}

	ctx := context.Context(c.ctx)
	if r.ctx != nil {
		ctx = r.ctx
	}
	if r.sc != nil && r.ctx == nil {
		ctx = metadata.NewServerContext(ctx, r.sc) // else r.ctx holds it
	}
	args := r.args // a lane's, reset when its last call ended
	if args == nil && r.m.m.NewArgs == nil {
		// A streaming function called as a unary one (stream.go).
		args = unaryStream{}
	}
	if args == nil {
		if m := r.m.m; m.NewCall != nil && m.HandleCall != nil {
			args, r.call = m.NewCall(nil)
		} else {
			args = m.NewArgs()
		}
	}
	var (
		res proto.Struct
		err error
	)
	// Large arguments keep their bytes in the frame buffer rather than in
	// fresh copies; the handler owns the buffer then. Borrowed arguments
	// (borrow_args) alias it too, but the buffer stays the request's and
	// goes back to the pool once the reply is written (freeRequest), or
	// alias a lane's lease, which the engine reuses once the reply is sent.
	// A call over its function's rate limit is answered before its
	// arguments are decoded: turning it away must cost less than running it.
	limited := r.m.limiter != nil && !r.m.limiter.Allow()
	borrow := (r.buf != nil || r.lease) && r.m.borrow && !limited
	alias := r.buf != nil && len(r.body) >= wire.AliasMin && !limited
	switch {
	case limited:
		err = proto.ErrOverloaded
	case alias || borrow:
		err = codec.DecodeAliased(r.proto, r.body, r.m.lim, args)
	default:
		err = codec.Decode(r.proto, r.body, r.m.lim, args)
	}
	if r.buf != nil && !borrow {
		wire.Release(r.buf, alias)
		r.buf = nil
	}
	r.body = nil
	switch {
	case limited:
	case err != nil:
		err = proto.NewApplicationException(proto.ExcProtocolError, "decode "+r.m.m.Name+" args: "+err.Error())
	default:
		res, err = c.invoke(ctx, r, args, r.call)
	}
	if r.meter != nil {
		// A metered lane's call ends once its reply is out (the lane's
		// afterReply): its context, its outcome, its latency.
		r.res, r.err = res, err
	} else {
		c.releaseCtx(r)
		outcome := serverOutcome(res, err, r.oneway)
		r.end = time.Since(epoch)
		cc.end(st, r.end-start, outcome, outcome == proto.OutcomeOK)
	}
	if err != nil || res == nil {
		return st, proto.Exception, c.failReply(r, err) // errstatus.go
	}
	return st, proto.Reply, res
}

// checkWrite tears the connection down after a failed or timed-out write:
// replies can no longer reach the client, so reading more calls is waste.
// A lane stream's outbox closed (streamcore.ErrLaneGone) is no failed
// write: the lane left the stream (its end or a reset went) while its
// handler still wrote, as a TCP stream's handler writing after a reset,
// and the lane serves on (it closed the lane: the next stream or call a
// client sent it, the lane taken from the pool, failed with "rdma:
// closed", a flake of TestLaneStreamCancelKeepsLanes under -race). A lane
// that is really gone ends its connection itself.
func (c *conn) checkWrite(err error) {
	if err == nil || errors.Is(err, streamcore.ErrLaneGone) {
		return
	}
	c.writeFail.Do(func() {
		c.wrFailed.Store(true)
		c.why.CompareAndSwap(whyNone, whyWriteError)
		c.s.log.Info("hatrpc: closing connection after write failure", "remote", c.remote, "err", err)
		c.abort()
		// The replies it was owed are garbage now, however small each
		// (8 connections flooding getCounters left a server at 333 MB
		// 10 s after they were gone): give the memory back, at most
		// once per giveBackEvery (budget.go).
		if c.s.budget.total > 0 {
			c.s.budget.giveBackAgain()
		}
	})
}

// fatalReply answers a message the server cannot process before the
// connection is closed, when it still knows whom to answer.
func (c *conn) fatalReply(to *replyTo, cause error) {
	c.s.log.Warn("hatrpc: closing connection after bad input", "remote", c.remote, "err", cause)
	c.mu.Lock()
	c.lingers = true
	c.mu.Unlock()
	c.replyNow(to, proto.Exception, proto.NewApplicationException(proto.ExcProtocolError, cause.Error()), nil)
}

func (c *conn) cancelCall(seqid int32) {
	if cctx := c.calls.find(seqid); cctx != nil {
		cctx.cancel(context.Canceled)
	}
}

// readFailed ends the read side. A vanished client cancels in-flight calls;
// a draining server lets them finish.
func (c *conn) readFailed(err error) {
	c.httpReadEnd(err)
	c.mu.Lock()
	draining := c.draining
	laning := c.fp != nil
	c.readDone = true
	c.readEnded.Store(true)
	c.mu.Unlock()
	if laning {
		c.why.CompareAndSwap(whyNone, whyLane)
	}
	c.noteReadEnd(err, draining)
	// A stream cannot go on without its reader, draining or not.
	c.endStreams(fmt.Errorf("server: connection closed: %w", err))
	if !draining {
		switch why := c.why.Load(); {
		case why == whyHandshake || why == whyIdle || why == whySlow:
			// Expected in numbers (idle clients, an attack): not logged one by one.
			c.s.log.Debug("hatrpc: connection closed", "remote", c.remote, "reason", whyNames[why])
		case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF):
			c.s.log.Info("hatrpc: connection closed", "remote", c.remote, "err", err)
		}
		c.cancel()
	}
	c.maybeFinish()
}

const (
	lingerTime  = 250 * time.Millisecond
	lingerBytes = 4 << 20
)
