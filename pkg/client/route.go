package client

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// The transport seam (docs/design/transport.md). A call leaves by one
// route: the Conn's TCP sessions (tcpRoute), the lane pool of its method
// (*lanePool) or the process's FLOCK handle (flockRoute). The route of a
// method is picked once from its plan and the transports the server
// granted, and cached per Conn and method; it is picked again only when
// the session's grant or the fast path's state changes (a fallback, a
// re-try after WithFastPathRetry's backoff). A call is encoded at most
// once, by the route that sends it: a route that cannot take the call
// after all (FLOCK: too large to share; a lane that cannot open; the
// fast path gone) hands it on to the next route with the bytes it
// encoded, which that route sends as they are.

// route carries the calls of a method. call sends req and decodes the
// reply into result; a route that cannot take the call passes req on.
type route interface {
	call(ctx context.Context, req request, result proto.Struct) error
}

// request is one call on its way. Passed by value: the routes run within
// the caller's call, and a pointer through the interface would cost an
// allocation per call.
type request struct {
	m      *Method
	sess   *session // the Conn's session when the call started
	args   proto.Struct
	oneway bool
	// frame is the call as a fast-path route encoded it: a sealed HatRPC
	// frame with seqid 1 (lane headers, "Service:name"). A route it is
	// passed on to sends these bytes; nil while nothing is encoded.
	frame []byte
	// fromFLOCK: the FLOCK route passed the call on, so the lane pool
	// must not send it back there.
	fromFLOCK bool
	// use is CallBorrowed's: the route that decodes the reply decodes it
	// in place where it can and runs use once on result (nil: Call).
	use func() error
}

// binaries is how a fast path decodes r's reply: a borrower's in place.
func (r *request) binaries() binaries {
	if r.use != nil {
		return aliasBinaries
	}
	return copyBinaries
}

// routeEntry is a method's cached route and what it was picked under.
type routeEntry struct {
	r    route
	key  routeKey
	want hints.Transport // the transport the method's hints ask for
	caps uint64          // of the session it was picked for
	gen  uint64          // lanes.gen when picked
	// retryAt: the route is TCP because the fast path fell back, until
	// the re-try is due; zero otherwise.
	retryAt time.Time
}

// routeKey names a method's cached route; a struct, so finding it per
// call builds no string.
type routeKey struct{ svc, fn string }

// routes caches each method's route.
type routes struct {
	m     sync.Map      // routeKey -> *routeEntry
	picks atomic.Uint64 // routes picked, for tests
}

// fresh reports whether e still holds for a call on a session granted
// caps, under fast-path generation gen, of a method asking for want.
func (e *routeEntry) fresh(c *Conn, caps, gen uint64, want hints.Transport) bool {
	return e.caps == caps && e.gen == gen && e.want == want && (e.retryAt.IsZero() || c.o.now().Before(e.retryAt))
}

// routeFor returns the route of m's call on s: TCP when the session has no
// fast path, else the method's cached route, picked again when stale. mi,
// when not nil, is m's entry in the Conn's method cache, whose copy of the
// route is looked at first: no map lookup per call.
func (c *Conn) routeFor(s *session, m *Method, mi *methodInfo) (route, error) {
	if s.caps&transport.LaneCaps() == 0 {
		return tcpRoute{c}, nil
	}
	gen := c.lanes.generation()
	want := hints.TransportAuto
	if m.Hints != nil {
		want = m.Hints.Client.Transport
	}
	key := routeKey{m.Service, m.Name}
	if mi != nil {
		// The names are compared too: a caller may reuse one Method value
		// for several methods.
		if e := mi.route.Load(); e != nil && e.fresh(c, s.caps, gen, want) && e.key == key {
			return e.r, nil
		}
	}
	var e *routeEntry
	if v, ok := c.routes.m.Load(key); ok && v.(*routeEntry).fresh(c, s.caps, gen, want) {
		e = v.(*routeEntry)
	} else {
		r, retryAt, err := c.pickRoute(s, m)
		if err != nil {
			return nil, err
		}
		c.routes.picks.Add(1)
		e = &routeEntry{r: r, key: key, want: want, caps: s.caps, gen: gen, retryAt: retryAt}
		c.routes.m.Store(key, e)
	}
	if mi != nil {
		mi.route.Store(e)
	}
	return e.r, nil
}

// methodInfo is what a Conn keeps of a *Method it was called with.
type methodInfo struct {
	key   *Method                    // the Method the Conn was called with
	m     *Method                    // as called: planned at service level with WithServiceLevelHints
	route atomic.Pointer[routeEntry] // the route last used, checked as routes.m's
}

// methodCache maps the *Method values a Conn is called with (generated
// clients pass the same ones every call) to their methodInfo: one lookup
// by pointer in a map that is only read per call, instead of one sync.Map
// lookup by name for the hints and one by service and name for the route.
// It holds at most maxMethodInfos methods; calls of others (a caller
// building a Method per call) take the lookups by name. In front of the
// map, hot is a direct-mapped table by the Method's address: a hit is one
// load and a compare, where hashing the pointer and probing the map cost
// ~10 ns a call; a miss (a collision, or the first call) takes the map
// and fills the slot.
type methodCache struct {
	hot [hotMethods]atomic.Pointer[methodInfo]
	mu  sync.Mutex
	all atomic.Pointer[map[*Method]*methodInfo] // copied on write, under mu
}

const (
	maxMethodInfos = 256
	hotMethods     = 16 // a power of two: hotSlot keeps the top 4 bits
)

// hotSlot is m's slot in hot: Fibonacci hashing of its address (generated
// Methods are package variables a few dozen bytes apart).
func hotSlot(m *Method) uintptr {
	return uintptr(uint64(uintptr(unsafe.Pointer(m))>>3) * 0x9E3779B97F4A7C15 >> (64 - 4))
}

// get returns m's methodInfo, adding it (and running prepare on m once)
// when there is room; nil when there is none.
func (mc *methodCache) get(m *Method, prepare func(*Method) *Method) *methodInfo {
	h := &mc.hot[hotSlot(m)]
	if mi := h.Load(); mi != nil && mi.key == m {
		return mi
	}
	mi := mc.lookup(m, prepare)
	if mi != nil {
		h.Store(mi)
	}
	return mi
}

func (mc *methodCache) lookup(m *Method, prepare func(*Method) *Method) *methodInfo {
	if all := mc.all.Load(); all != nil {
		if mi := (*all)[m]; mi != nil {
			return mi
		}
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var old map[*Method]*methodInfo
	if all := mc.all.Load(); all != nil {
		old = *all
	}
	if mi := old[m]; mi != nil {
		return mi
	}
	if len(old) >= maxMethodInfos {
		return nil
	}
	mi := &methodInfo{key: m, m: prepare(m)}
	next := make(map[*Method]*methodInfo, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[m] = mi
	mc.all.Store(&next)
	return mi
}

// tcpRoute sends calls over the Conn's TCP sessions.
type tcpRoute struct{ c *Conn }

func (t tcpRoute) call(ctx context.Context, req request, result proto.Struct) error {
	return t.callOn(ctx, t.c.pick(req.sess), req, result)
}

// callOn sends the call on s, the session pick chose. An extra retired
// since the pick may already be closed (retirement closes an extra it
// finds idle), and a call counted on it after that would fail unsent; so
// the call counts itself first and then looks: either it sees the flag
// and goes to the Conn's current connection, or retirement sees the call
// and leaves the extra open until the call ends (both sides use
// sequentially consistent atomics, so one of the two must happen).
func (t tcpRoute) callOn(ctx context.Context, s *session, req request, result proto.Struct) error {
	s.inflight.Add(1)
	if s.retired.Load() {
		s.closeIfRetired(s.inflight.Add(-1))
		cur, err := t.c.session(ctx)
		if err != nil {
			return err
		}
		if req.frame != nil && !cur.hat {
			// A fast-path frame needs HatRPC framing; the server now
			// speaks plain Thrift, and the next call is routed afresh.
			return &ConnError{Op: "write", Err: errRetired}
		}
		s = cur
		s.inflight.Add(1)
	}
	tcpCalls.Add(1)
	t.c.tcpSent.Add(1)
	var err error
	if req.frame != nil {
		err = s.callFrame(ctx, req.frame, req.oneway, result, req.use)
	} else {
		name := req.m.Name
		if t.c.o.multiplexed && req.m.Service != "" {
			name = req.m.Service + ":" + req.m.Name
		}
		err = s.call(ctx, name, req.oneway, req.args, result, req.use)
	}
	tcpCalls.Add(-1)
	s.closeIfRetired(s.inflight.Add(-1))
	return err
}

// callFrame sends a call a fast-path route encoded (frame, see request)
// on the session: the frame gets the session's seqid, a fresh timeout and
// the request id the session's calls carry, around the same message bytes.
func (s *session) callFrame(ctx context.Context, frame []byte, oneway bool, result proto.Struct, use func() error) error {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return errDeadlineNotSent
		}
	}
	h, err := wire.DecodeHeader(frame, len(frame))
	if err != nil {
		return err
	}
	off := wire.HeaderSize
	if h.Flags&wire.FlagHeaders != 0 {
		n, err := wire.HeaderBlockLen(frame[off:])
		if err != nil {
			return err
		}
		off += n
	}
	seq, cl, err := s.reserve(oneway)
	if err != nil {
		return err
	}

	bp := wire.GetBuf()
	b := append((*bp)[:0], frame[:off]...)
	flags := h.Flags
	if flags&wire.FlagHeaders == 0 && s.carriesHeaders() {
		// A lane sends no header block for a call without headers; over
		// TCP such a call carries a request id, as it would have had it
		// been sent here in the first place.
		var hf uint8
		if b, hf = s.appendRequestHead(ctx, b, seq); hf != 0 {
			flags |= hf
		}
	}
	p := h.Protocol()
	b = appendWithSeqid(b, p, frame[off:], seq)
	wire.SealFrame(b, h.Kind, flags, seq, timeout)
	*bp = b
	noteSize(&s.reqSize, len(b))
	if werr := s.w.Write(b); werr != nil {
		s.fail(werr)
		err = &ConnError{Op: "write", Err: werr}
	}
	wire.PutBuf(bp)
	if err != nil || oneway {
		return s.unreserve(cl, seq, err)
	}
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	return s.finish(ctx, codec, cl, p, result, use)
}

// appendWithSeqid appends the Thrift message msg to b with its seqid set
// to seq (a lane frame's message carries seqid 1; over TCP the server
// sees the session's, as for any call sent there).
func appendWithSeqid(b []byte, p proto.Protocol, msg []byte, seq int32) []byte {
	mh, err := wire.ParseMsgHeader(p, msg)
	if err != nil || mh.Seqid == seq {
		return append(b, msg...) // the server answers what it cannot parse
	}
	if p == proto.Compact {
		// Magic, type and version; then the seqid varint (its length
		// may change); then the name and the body.
		_, n := binary.Uvarint(msg[2:]) // ParseMsgHeader read it
		b = append(b, msg[:2]...)
		b = binary.AppendUvarint(b, uint64(uint32(seq)))
		return append(b, msg[2+n:]...)
	}
	start := len(b)
	b = append(b, msg...)
	at := start + mh.Body - 4
	b[at], b[at+1], b[at+2], b[at+3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	return b
}
