package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// ErrConnClosed is matched (errors.Is) by every error of a call that could
// not complete because its connection broke or the Conn was closed. Later
// calls on the same Conn reconnect.
var ErrConnClosed = errors.New("client: connection closed")

// ConnError carries the cause of a connection failure; it matches ErrConnClosed.
type ConnError struct {
	Op  string // "dial", "tls", "handshake", "write", "read", "close"
	Err error
}

func (e *ConnError) Error() string {
	switch {
	case e.Op == "dial" && e.Err != nil:
		// The connection never opened: net's own "dial tcp ADDR: connect:
		// connection refused" says what happened.
		var oe *net.OpError
		if errors.As(e.Err, &oe) && oe.Op == "dial" {
			return "client: " + e.Err.Error()
		}
		return "client: dial: " + e.Err.Error()
	case e.Op == "tls" && e.Err != nil:
		return "client: TLS handshake: " + e.Err.Error()
	case e.Err == nil:
		return "client: connection closed (" + e.Op + ")"
	}
	return "client: connection closed (" + e.Op + "): " + e.Err.Error()
}

// Is makes errors.Is(err, ErrConnClosed) true.
func (e *ConnError) Is(target error) bool { return target == ErrConnClosed }

func (e *ConnError) Unwrap() error { return e.Err }

// Conn is a client connection, safe for concurrent use: calls from many
// goroutines are pipelined on one socket and matched to replies by seqid.
type Conn struct {
	addr string
	o    options

	mu      sync.Mutex
	sess    *session
	cur     atomic.Pointer[session] // sess, for session's lock-free look
	old     []*session              // sessions told to go away, still finishing calls
	closed  bool
	dialing chan struct{} // closed when the reconnect in progress ends

	retry          retryState // retry.go
	fns            sync.Map   // method name -> *hints.Function given with WithHints
	planned        sync.Map   // method name -> *hints.Function its calls or streams ran by (noteHints)
	svcMethods     sync.Map   // *Method -> *Method planned at service level (WithServiceLevelHints)
	cores          int
	lanes          lanes
	flock          *sharedFlock                // this Conn's reference to the process's FLOCK handle
	upgradeErr     atomic.Pointer[error]       // why the last handshake fell back to plain Thrift (FastPathErr)
	spread         spreader                    // extra TCP connections, see spread.go
	routes         routes                      // each method's route (route.go)
	tcpSent        atomic.Uint64               // calls sent over TCP (RouteStats)
	methods        methodCache                 // per *Method called with (route.go)
	detected       atomic.Pointer[wire.Format] // plain-Thrift stack found by probing (detect.go)
	http           *httpTransport              // set for http:// and https:// addresses (http.go)
	helloCutLogged atomic.Bool                 // planChecks said its hello could not hold every plan
}

// Dial connects to addr, runs the capability handshake and returns a Conn.
// An http:// or https:// URL instead makes a Conn that sends each call as
// an HTTP POST to it (Thrift over HTTP, as Apache's THttpClient), which
// connects on its first call and never upgrades to HatRPC framing.
func Dial(ctx context.Context, addr string, opts ...Option) (*Conn, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	switch o.proto {
	case proto.Binary, proto.Compact:
	case proto.JSON:
		if o.theader {
			return nil, fmt.Errorf("client: THeader carries binary or compact, not %v", o.proto)
		}
		// TJSONProtocol stays plain Thrift: HatRPC framing has no room
		// for it, so there is nothing to upgrade to.
		o.noUpgrade = true
	default:
		return nil, fmt.Errorf("client: unsupported protocol %v", o.proto)
	}
	if err := checkBuilt(o.rdma); err != nil {
		return nil, err
	}
	if err := wire.CheckMessageLimit(o.limits.MaxMessageSize); err != nil {
		return nil, fmt.Errorf("client: WithLimits: %w", err)
	}
	if err := checkRDMAChoice(&o); err != nil {
		return nil, err
	}
	c := &Conn{addr: addr, o: o, cores: runtime.NumCPU()}
	c.lanes.c = c
	for _, svc := range o.hints {
		for i := range svc.Functions {
			fn := &svc.Functions[i]
			if o.svcLevel {
				fn = &hints.Function{Name: fn.Name, Client: svc.Client, Server: svc.Server, Stream: fn.Stream}
			}
			c.fns.Store(fn.Name, fn)
			c.fns.Store(svc.Name+":"+fn.Name, fn)
		}
	}
	if isHTTPAddr(addr) {
		h, err := newHTTPTransport(addr, &c.o)
		if err != nil {
			return nil, err
		}
		c.http = h
		return c, nil
	}
	s, err := c.connect(ctx, offer(!o.noUpgrade))
	if err != nil {
		return nil, err
	}
	c.setSess(s)
	return c, nil
}

// setSess makes s the Conn's session (nil: none); c.mu is held, except in
// Dial.
func (c *Conn) setSess(s *session) {
	c.sess = s
	c.cur.Store(s)
}

// Upgraded reports whether the current connection is alive and speaks
// HatRPC framing (false: plain Thrift, e.g. against an Apache server, or
// no live connection).
func (c *Conn) Upgraded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil && c.sess.hat && c.sess.usable()
}

// Close closes the connection; pending calls fail with ErrConnClosed.
func (c *Conn) Close() error {
	if c.http != nil {
		c.http.shutdown()
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	extra, dialDone := c.closeSpreadLocked()
	all := append(append(c.old, c.sess), extra...)
	c.setSess(nil)
	c.old = nil
	c.mu.Unlock()
	if dialDone != nil {
		<-dialDone
	}
	c.lanes.close()
	c.releaseFlock()
	for _, s := range all {
		if s != nil {
			s.fail(&ConnError{Op: "close"})
			<-s.done
		}
	}
	return nil
}

// Call invokes m with args and decodes the reply into result. For oneway
// methods result is nil and Call returns once the request is written. An
// exception reply becomes a *proto.ApplicationException error.
func (c *Conn) Call(ctx context.Context, m *Method, args, result proto.Struct) error {
	if len(c.o.interceptors) == 0 {
		return c.invoke(ctx, m, args, result)
	}
	return chain(ctx, c.o.interceptors, m, args, result, c.invoke)
}

func chain(ctx context.Context, ics []Interceptor, m *Method, args, result proto.Struct, final Invoker) error {
	if len(ics) == 0 {
		return final(ctx, m, args, result)
	}
	return ics[0](ctx, m, args, result, func(ctx context.Context, m *Method, a, r proto.Struct) error {
		return chain(ctx, ics[1:], m, a, r, final)
	})
}

func (c *Conn) invoke(ctx context.Context, m *Method, args, result proto.Struct) error {
	return c.call(ctx, m, args, result, nil) // retry.go: call options, retries, hedges
}

// invokeUse is invoke for CallBorrowed's use (nil for a plain call), which
// the decode of the reply runs on result in place (see request.use).
func (c *Conn) invokeUse(ctx context.Context, m *Method, args, result proto.Struct, use func() error) error {
	mi := c.methods.get(m, c.prepare)
	if mi != nil {
		m = mi.m
	} else {
		m = c.prepare(m)
	}
	if m.Hints != nil {
		// The hint bounds the call on top of the caller's deadline: the
		// earlier of the two applies.
		if d := m.Hints.Client.Timeout; d > 0 {
			if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > d {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
		}
	}
	if c.o.callTimeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.o.callTimeout)
			defer cancel()
		}
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	if c.http != nil {
		return c.http.call(ctx, c, m, args, result, use)
	}
	s, err := c.session(ctx)
	if err != nil {
		return err
	}
	req := request{m: m, sess: s, args: args, oneway: m.Oneway, use: use}
	if s.caps&transport.LaneCaps() == 0 {
		return tcpRoute{c}.call(ctx, req, result) // no fast path: no route to look up
	}
	r, err := c.routeFor(s, m, mi)
	if err != nil {
		return err
	}
	return r.call(ctx, req, result)
}

// tcpCalls counts the process's TCP calls in flight, over every Conn: a
// caller polls its socket only when it is the only one (wire.SpinReader).
var tcpCalls atomic.Int32

// serviceLevel returns m planned from its service's level hints (the
// table given with WithHints), cached per method.
func (c *Conn) serviceLevel(m *Method) *Method {
	if v, ok := c.svcMethods.Load(m); ok {
		return v.(*Method)
	}
	out := m
	if v, ok := c.fns.Load(m.Service + ":" + m.Name); ok {
		cp := *m
		cp.Hints = v.(*hints.Function)
		out = &cp
	}
	c.svcMethods.Store(m, out)
	return out
}

// session returns a usable session, reconnecting when the current one broke
// or was told to go away. One caller dials; the others wait for it, each
// bounded by its own context.
func (c *Conn) session(ctx context.Context) (*session, error) {
	// The common case without a lock: the current session, still usable
	// (cur is c.sess, down mirrors s.err and s.goaway).
	if s := c.cur.Load(); s != nil && !s.down.Load() {
		return s, nil
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, &ConnError{Op: "call", Err: errors.New("Conn closed")}
		}
		if s := c.sess; s != nil && s.usable() {
			c.mu.Unlock()
			return s, nil
		}
		if ch := c.dialing; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s := c.sess; s != nil {
			c.old = append(c.old, s)
			c.setSess(nil)
			c.retireSpreadLocked()
		}
		c.reap()
		ch := make(chan struct{})
		c.dialing = ch
		hello := offer(!c.o.noUpgrade)
		c.mu.Unlock()

		s, err := c.connect(ctx, hello)

		c.mu.Lock()
		c.dialing = nil
		close(ch)
		if err == nil && c.closed {
			c.mu.Unlock()
			s.fail(&ConnError{Op: "close"})
			<-s.done
			return nil, &ConnError{Op: "call", Err: errors.New("Conn closed")}
		}
		if err == nil {
			c.setSess(s)
		}
		c.mu.Unlock()
		return s, err
	}
}

// reap forgets old sessions whose reader has exited; c.mu is held.
func (c *Conn) reap() {
	keep := c.old[:0]
	for _, s := range c.old {
		select {
		case <-s.done:
		default:
			keep = append(keep, s)
		}
	}
	c.old = keep
}

// peerHungUp tells a peer that closed the connection (worth a plain retry)
// from one that is slow or dead (a timeout, not worth it).
func peerHungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// offer is whether a new session offers the HatRPC handshake, which
// upgrades it when the server speaks HatRPC.
type offer bool

const (
	offerNothing offer = false // plain Thrift only
	offerHello   offer = true
)

// dialSessionCaps dials a session in the Conn's current stack, offering
// (with offerHello) caps in the handshake; 0 offers everything this Conn
// can do (framing, lanes and their plan checks).
func (c *Conn) dialSessionCaps(ctx context.Context, hello offer, caps uint64) (*session, error) {
	return c.dialSessionFormat(ctx, hello, caps, c.wireFormat())
}

// dialSessionFormat is dialSessionCaps speaking plain Thrift stack f until
// (and unless) the handshake upgrades the session.
func (c *Conn) dialSessionFormat(ctx context.Context, hello offer, caps uint64, f wire.Format) (*session, error) {
	dctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
	defer cancel()
	nc, err := c.dialRaw(dctx)
	if err != nil {
		return nil, err
	}
	if c.o.zlib {
		nc = wire.NewZlibConn(nc)
	}
	s := newSession(c, nc, f)
	s.init()
	if hello == offerHello {
		hctx, hcancel := context.WithTimeout(dctx, c.o.handshakeTimeout)
		err := s.handshake(hctx, caps)
		hcancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	s.mu.Lock()
	s.reading = true
	s.mu.Unlock()
	go s.readIdle()
	return s, nil
}

// dialRaw opens a TCP (or TLS, or WithDialer) connection to the server.
func (c *Conn) dialRaw(dctx context.Context) (net.Conn, error) {
	var (
		nc  net.Conn
		err error
	)
	if c.o.dial != nil {
		nc, err = c.o.dial(dctx, c.addr)
	} else {
		var d net.Dialer
		network, address := wire.Network(c.addr)
		nc, err = d.DialContext(dctx, network, address)
	}
	if err != nil {
		return nil, &ConnError{Op: "dial", Err: err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.o.tls != nil {
		cfg := c.o.tls
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = wire.ServerName(c.addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			nc.Close()
			return nil, &ConnError{Op: "tls", Err: err}
		}
		nc = tc
	}
	return nc, nil
}

// session is one network connection of a Conn.
type session struct {
	c      *Conn
	nc     net.Conn
	br     *bufio.Reader
	spin   *wire.SpinReader // under br; nil unless nc is a plain socket
	w      *wire.Writer
	hat    bool
	caps   uint64 // capabilities the server granted in the handshake
	format wire.Format
	done   chan struct{} // closed once the session failed and nobody reads
	idle   *time.Timer   // starts the idle reader; see release

	reqHint  wire.SizeHint // size of the last request's encode buffer; see call
	reqSize  atomic.Int32  // wire size of the last request (spread.go)
	repSize  atomic.Int32  // wire size of the last reply (spread.go)
	inflight atomic.Int32  // TCP calls sent or being sent, not yet answered
	down     atomic.Bool   // err or goaway set: not usable (set under mu with them)
	retired  atomic.Bool   // an extra connection taken out of use: closes once idle (spread.go)

	mu      sync.Mutex
	seq     int32
	pending callTable
	err     error
	goaway  bool
	// st: the connection's streams, when the server granted them;
	// streams counts those not finished (stream.go): while any is, the
	// read role is held, or parked with a lone server stream
	// (stream_read.go).
	st      *streamcore.Conn
	streams int
	// fnWin: the server's own per-stream receive windows by function
	// name (its stream_window hints), when it granted
	// wire.CapStreamWindows; nil otherwise. Read-only after the hello.
	fnWin map[string]wire.StreamWindows

	// The read role (see reader.go): at most one goroutine reads at a time.
	reading    bool
	leader     *call           // the call whose caller holds the role, nil for the idle reader
	leaderDone <-chan struct{} // the Done channel of the leader's context
	watch      *ctxWatch       // see watchDone
	midFrame   bool            // the role holder is inside a frame: interrupting it would desync
	deadline   bool            // a read deadline is set on nc
	idleArmed  bool
	doneClosed bool
	// A server stream's consumer holding the read role (stream_read.go):
	// streamLeader is its stream, leadStop says the stream ended while it
	// read. filedID is the stream of the last stream frame read (0: none);
	// only the role's holder touches it.
	streamLeader *clientStream
	leadStop     bool
	filedID      int32
	selfReads    int64 // frames a stream's consumer read for itself (tests)
	// repSpare: a reply buffer for the role holder's next readOne, from
	// a caller's record (spareFromLocked); only the holder uses it.
	repSpare wire.Spare
}

// call is one outstanding request waiting for its reply. The fields after
// err are guarded by session.mu.
type call struct {
	// codec and req: the caller's codec and small request buffer, kept
	// with the record between calls (callKit). rep: a small reply buffer
	// kept from its last call, which the read role takes for a
	// later reply under session.mu (spareFromLocked).
	codec *wire.Codec
	req   wire.Spare
	rep   wire.Spare

	done  chan struct{}
	reply *[]byte
	off   int   // message start within reply (after a HatRPC header)
	seq   int32 // the call's seqid on its session (reserve)
	err   error

	waiting   bool // the caller blocks on done
	signaled  bool // a send on done is outstanding
	lead      bool // that send hands over the read role
	cancelled bool // the caller's context ended while it held the read role
	// watch: the session's kept context watch the waiting caller relies
	// on instead of selecting on its context's Done (see await); woke:
	// why that watch signalled it.
	watch *ctxWatch
	woke  uint8
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newSession(c *Conn, nc net.Conn, f wire.Format) *session {
	sr := wire.NewSpinReader(nc)
	return &session{
		c: c, nc: nc, spin: sr,
		br:     bufio.NewReaderSize(sr.Reader(nc), 32<<10),
		w:      newWriter(nc, c.o.writeTimeout),
		format: f,
		done:   make(chan struct{}),
	}
}

func (s *session) init() {
	s.idle = time.AfterFunc(time.Hour, s.idleRead)
	s.idle.Stop()
}

func newWriter(nc net.Conn, timeout time.Duration) *wire.Writer {
	w := wire.NewWriter(nc, nil)
	w.SetTimeout(timeout)
	return w
}

func (s *session) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && !s.goaway
}

func putLen(b []byte, n int) {
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// call sends one request and waits for its reply.
func (s *session) call(ctx context.Context, name string, oneway bool, args, result proto.Struct, use func() error) error {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return errDeadlineNotSent
		}
	}
	seq, cl, err := s.reserve(oneway)
	if err != nil {
		return err
	}
	codec, bp := s.callKit(cl)
	b := *bp
	switch {
	case s.hat:
		b = b[:wire.HeaderSize]
	case s.format.Framed:
		b = b[:wire.PlainFrameHead(s.format)]
	}
	var hflags uint8
	typ, kind := proto.Call, wire.KindCall
	if oneway {
		typ, kind = proto.Oneway, wire.KindOneway
	}
	if s.carriesHeaders() {
		b, hflags = s.appendRequestHead(ctx, b, seq)
	}
	// Large binary values stay in the caller's slices and go out with
	// one vectored write: no copy of them into the frame.
	b, refs, err := codec.AppendMessageRefs(b, s.format.Proto, name, typ, seq, args)
	if err == nil {
		if s.hat {
			flags := hflags
			if s.format.Proto == proto.Compact {
				flags |= wire.FlagCompact
			}
			wire.SealFrameRefs(b, refs, kind, flags, seq, timeout)
		} else if s.format.Framed {
			wire.SealPlainFrame(s.format, b, proto.RefsLen(refs))
		}
		*bp = b
		s.reqHint.Note(len(b))
		noteSize(&s.reqSize, len(b)+proto.RefsLen(refs))
		if werr := s.w.WriteVec(b, refs); werr != nil {
			s.fail(werr)
			err = &ConnError{Op: "write", Err: werr}
		}
	} else {
		*bp = b
	}
	keepReq(cl, bp)
	if err != nil || oneway {
		if cl == nil {
			wire.PutCodec(codec)
		}
		return s.unreserve(cl, seq, err)
	}
	return s.finish(ctx, codec, cl, s.format.Proto, result, use)
}

// callKit returns the codec and the request buffer of a call: cl's own,
// recycled with it (putCall), or pooled ones for a oneway call (cl nil).
// The request buffer is sized like the last request, so a large one is
// encoded into a pooled large buffer instead of growing a small one into
// fresh memory. Kept with the call record, they save four pool
// operations a call (~250 of a 64-caller 512 B call's ~11,000
// instructions, scripts/insn-ab.sh).
func (s *session) callKit(cl *call) (*wire.Codec, *[]byte) {
	if cl == nil {
		return wire.GetCodec(), s.reqHint.Buf()
	}
	if cl.codec == nil {
		cl.codec = wire.GetCodec()
	}
	if s.reqHint.Large() {
		return cl.codec, s.reqHint.Buf()
	}
	return cl.codec, cl.req.Get()
}

// keepReq disposes of a written request's buffer: kept by the call
// record cl if it is a small one, else back to the pool.
func keepReq(cl *call, bp *[]byte) {
	if cl != nil {
		cl.req.Keep(bp)
		return
	}
	wire.PutBuf(bp)
}

// putCall recycles cl with its codec, cleared so the pool holds nothing
// of the last call's values.
func putCall(cl *call) {
	if cl.codec != nil {
		cl.codec.Reset()
	}
	callPool.Put(cl)
}

// finish waits for the reply to the call cl and decodes it (in protocol
// p) into result; with a borrower's use, in place, and runs use on it
// before the buffer is released.
func (s *session) finish(ctx context.Context, codec *wire.Codec, cl *call, p proto.Protocol, result proto.Struct, use func() error) error {
	if cerr := s.await(ctx, cl, cl.seq); cerr != nil {
		return cerr
	}
	err := cl.err
	rp, off := cl.reply, cl.off
	cl.err, cl.reply, cl.cancelled = nil, nil, false
	if err != nil {
		putCall(cl)
		return err
	}
	noteSize(&s.repSize, len(*rp))
	s.captureReply(ctx, (*rp)[:off])
	msg := (*rp)[off:]
	if use != nil {
		err = s.withStatus(decodeReply(codec, p, msg, &s.c.o.limits, result, aliasBinaries), (*rp)[:off])
		if err == nil {
			err = use()
		} else {
			err = ownDeadline(ctx, err)
		}
		cl.rep.Keep(rp)
		putCall(cl) // codec is cl's: recycled once the decode is done
		return err
	}
	// A large result keeps its bytes in the frame buffer rather than in
	// fresh copies; the caller owns the buffer then.
	alias := len(msg) >= wire.AliasMin
	err = decodeReply(codec, p, msg, &s.c.o.limits, result, binaries(alias))
	err = s.withStatus(err, (*rp)[:off]) // status.go
	if alias {
		wire.Release(rp, alias)
	} else {
		cl.rep.Keep(rp)
	}
	putCall(cl)
	return ownDeadline(ctx, err)
}

// binaries is how a reply's binary values are decoded: copied into
// memory of their own, or in place, as slices of the reply's buffer (a
// large result's, whose buffer the caller then owns, or a borrower's,
// whose use runs while the buffer is valid).
type binaries bool

const (
	copyBinaries  binaries = false
	aliasBinaries binaries = true
)

func decodeReply(codec *wire.Codec, p proto.Protocol, msg []byte, lim *proto.Limits, result proto.Struct, bin binaries) error {
	mh, err := wire.ParseMsgHeader(p, msg)
	if err != nil {
		return err
	}
	switch mh.Type {
	case proto.Exception:
		var ae proto.ApplicationException
		if err := codec.Decode(p, msg[mh.Body:], lim, &ae); err != nil {
			return err
		}
		return &ae
	case proto.Reply:
		return decodeResult(codec, p, msg[mh.Body:], lim, result, bin)
	}
	return fmt.Errorf("%w: reply of message type %v", proto.ErrInvalidData, mh.Type)
}

// decodeResult decodes a reply's body into result (nothing when result is
// nil), its binary values as bin says.
func decodeResult(codec *wire.Codec, p proto.Protocol, body []byte, lim *proto.Limits, result proto.Struct, bin binaries) error {
	if result == nil {
		return nil
	}
	if bin == aliasBinaries {
		return codec.DecodeAliased(p, body, lim, result)
	}
	return codec.Decode(p, body, lim, result)
}

// take removes seq from the pending table; false if the reader got it first.
// unreserve ends a reserved call that will not wait for its reply: a
// oneway one (err nil), or one whose args did not encode (nothing was sent)
// or whose write failed, which failed the whole session; s.take may lose
// that race, and then the failure hands the call back.
func (s *session) unreserve(cl *call, seq int32, err error) error {
	if err != nil && cl != nil && s.take(seq) {
		putCall(cl)
	}
	return err
}

// reserve takes the session's next sequence id and, for a call that
// expects a reply, registers the call that will receive it; a session that
// failed refuses it.
func (s *session) reserve(oneway bool) (int32, *call, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, nil, &ConnError{Op: "write", Err: s.err}
	}
	s.seq++
	if s.seq <= 0 { // 0 is the handshake's
		s.seq = 1
	}
	var cl *call
	if !oneway {
		cl = callPool.Get().(*call)
		cl.seq = s.seq
		s.pending.put(s.seq, cl)
	}
	return s.seq, cl, nil
}

func (s *session) take(seq int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.take(seq) != nil
}

func (s *session) sendCancel(seq int32) {
	var f [wire.HeaderSize]byte
	wire.SealFrame(f[:], wire.KindCancel, 0, seq, 0)
	_ = s.w.Write(f[:])
}
