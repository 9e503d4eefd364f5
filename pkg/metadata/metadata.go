// Package metadata carries per-call key/value headers between HatRPC
// clients and servers: Apache Thrift's THeader info headers on THeader
// connections, and a header block in the HatRPC frame on upgraded TCP
// connections (see docs/headers.md). A client sets outgoing headers on the
// context of a call; a handler or server interceptor reads the incoming
// ones from its context and may set reply headers that the client can
// capture. It imports nothing of the runtime, so interceptor packages such
// as pkg/tracing depend on it alone.
package metadata

import (
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// MD is a set of headers. Keys are case sensitive, as in THeader.
type MD map[string]string

// RequestIDKey is the header that carries a call's request id. A HatRPC
// client sets it on every call that can carry headers unless the caller
// did (or the Conn was built WithoutRequestIDs).
const RequestIDKey = "x-request-id"

// Pairs makes an MD of alternating keys and values; a trailing key without
// value is ignored.
func Pairs(kv ...string) MD {
	md := make(MD, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		md[kv[i]] = kv[i+1]
	}
	return md
}

type outKey struct{}

// NewOutgoingContext returns ctx whose calls send md (replacing headers set
// before). md must not be changed afterwards.
func NewOutgoingContext(ctx context.Context, md MD) context.Context {
	return context.WithValue(ctx, outKey{}, md)
}

// AppendToOutgoingContext returns ctx whose calls send the headers already
// set on ctx plus the pairs kv (later values win).
func AppendToOutgoingContext(ctx context.Context, kv ...string) context.Context {
	old, _ := ctx.Value(outKey{}).(MD)
	md := make(MD, len(old)+len(kv)/2)
	maps.Copy(md, old)
	for i := 0; i+1 < len(kv); i += 2 {
		md[kv[i]] = kv[i+1]
	}
	return context.WithValue(ctx, outKey{}, md)
}

// FromOutgoingContext returns the headers calls made with ctx send. The
// map is shared: copy it before changing it.
func FromOutgoingContext(ctx context.Context) (MD, bool) {
	md, ok := ctx.Value(outKey{}).(MD)
	return md, ok
}

// NewRequestID returns a fresh request id (16 hex digits), unique within
// the process and random-looking (AppendRequestID).
func NewRequestID() string {
	return string(AppendRequestID(make([]byte, 0, 16)))
}

// ridNext numbers the process's request ids from a random start.
var ridNext atomic.Uint64

func init() { ridNext.Store(rand.Uint64()) }

// AppendRequestID appends a fresh request id to dst: the process's next
// number, from a random start, through a bijective mix (splitmix64's
// finalizer), so ids never repeat within a process (until 2^64 of them)
// and differ between processes as random ones do. A counter and a mix
// cost the call less than a draw from the runtime's generator (2.5 % of
// a client's CPU at 64 callers).
func AppendRequestID(dst []byte) []byte {
	return appendID(dst, mixID(ridNext.Add(1)))
}

// mixID is splitmix64's finalizer: each step (xor with a shift, multiply
// by an odd number) is invertible, so distinct inputs give distinct ids.
func mixID(v uint64) uint64 {
	v = (v ^ v>>30) * 0xbf58476d1ce4e5b9
	v = (v ^ v>>27) * 0x94d049bb133111eb
	return v ^ v>>31
}

// appendID appends v's bytes, least significant first, as hex: the digits
// of hex.AppendEncode of v in little-endian order, eight at a time from
// each half of v, with no table and no branch (hex.AppendEncode's growth
// and loop were ~190 instructions of a 64-caller call's ~11,400, a digit
// loop ~110; counted by scripts/insn-ab.sh).
func appendID(dst []byte, v uint64) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], hexDigits(uint32(v)))
	binary.LittleEndian.PutUint64(b[8:], hexDigits(uint32(v>>32)))
	return append(dst, b[:]...)
}

// hexDigits returns the eight hex digits of x's bytes, least significant
// byte first and each byte's high digit first, as the bytes of a
// little-endian word.
func hexDigits(x uint32) uint64 {
	t := uint64(x)
	t = (t | t<<16) & 0x0000ffff0000ffff
	t = (t | t<<8) & 0x00ff00ff00ff00ff // byte k of x in bits 16k..16k+7
	n := t>>4&0x000f000f000f000f | (t&0x000f000f000f000f)<<8
	// Each byte a digit value 0-15: '0'+n, and 'a'-'0'-10 = 39 more for
	// the values 10-15 (n+6 carries into bit 4 exactly for those).
	over := (n + 0x0606060606060606) >> 4 & 0x0101010101010101
	return n + 0x3030303030303030 + over*39
}

// ServerCall is the server side of one call's headers: what the client
// sent and what the handler answers with.
type ServerCall struct {
	in    MD
	raw   []byte // encoded headers, decoded on first use
	parse func([]byte) (MD, error)
	once  sync.Once

	mu    sync.Mutex
	reply MD
	// replied: SetReply was called. Reply, which the server calls for
	// every call, looks at it before taking mu: most handlers set none.
	replied atomic.Bool
}

// NewServerCall holds the incoming headers in (not copied).
func NewServerCall(in MD) *ServerCall { return &ServerCall{in: in} }

// NewLazyServerCall holds encoded incoming headers that parse decodes
// when a handler first asks for them: a call whose handler never looks
// pays for a copy of the bytes only. Headers that do not decode read as
// none.
func NewLazyServerCall(raw []byte, parse func([]byte) (MD, error)) *ServerCall {
	return &ServerCall{raw: raw, parse: parse}
}

// NewLazyServerCallCopy is NewLazyServerCall with a copy of raw, which the
// caller may reuse once it returns. A small block (a request id and a few
// more headers) is copied into the ServerCall's own allocation: one
// allocation a call instead of two.
func NewLazyServerCallCopy(raw []byte, parse func([]byte) (MD, error)) *ServerCall {
	if len(raw) > inlineRaw {
		return NewLazyServerCall(bytes.Clone(raw), parse)
	}
	return new(serverCallRaw).fill(raw, parse)
}

// inlineRaw is the largest header block NewLazyServerCallCopy keeps in
// the ServerCall's allocation: a request id's block is 31 bytes.
const inlineRaw = 64

type serverCallRaw struct {
	ServerCall
	buf [inlineRaw]byte
}

// fill makes c the ServerCall of raw (at most inlineRaw bytes), copied
// into c's own buffer.
func (c *serverCallRaw) fill(raw []byte, parse func([]byte) (MD, error)) *ServerCall {
	c.parse = parse
	c.raw = c.buf[:copy(c.buf[:], raw)]
	return &c.ServerCall
}

// ServerCallSlab is NewLazyServerCallCopy for a reader that makes one
// call's headers after another (a connection's reader): a small block's
// ServerCall comes from a block of serverCallSlabSize, one allocation
// per block instead of one a call. A ServerCall is never handed out
// twice, so a handler that keeps its call's context keeps reading its
// own headers (and pins its block, 1 KiB, no more). Not safe for
// concurrent use.
type ServerCallSlab struct {
	blk *[serverCallSlabSize]serverCallRaw
	i   int // the next one to hand out
}

// serverCallSlabSize ServerCalls with their 64-byte blocks (144 bytes
// each) fill a 1 KiB size class.
const serverCallSlabSize = 7

// NewLazyCopy is NewLazyServerCallCopy from the slab.
func (s *ServerCallSlab) NewLazyCopy(raw []byte, parse func([]byte) (MD, error)) *ServerCall {
	if len(raw) > inlineRaw {
		return NewLazyServerCall(bytes.Clone(raw), parse)
	}
	if s.blk == nil || s.i == serverCallSlabSize {
		s.blk, s.i = new([serverCallSlabSize]serverCallRaw), 0
	}
	c := &s.blk[s.i]
	s.i++
	return c.fill(raw, parse)
}

// Incoming returns the headers the client sent.
func (c *ServerCall) Incoming() MD {
	if c.parse != nil {
		c.once.Do(func() {
			if md, err := c.parse(c.raw); err == nil {
				c.in = md
			}
			c.raw = nil
		})
	}
	return c.in
}

// SetReply adds reply headers.
func (c *ServerCall) SetReply(kv ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replied.Store(true)
	if c.reply == nil {
		c.reply = make(MD, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.reply[kv[i]] = kv[i+1]
	}
}

// Reply returns a copy of the reply headers set so far (nil if none).
func (c *ServerCall) Reply() MD {
	if !c.replied.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reply) == 0 {
		return nil
	}
	return maps.Clone(c.reply)
}

type serverKey struct{}

// NewServerContext attaches sc to a handler's context (the server does
// this for every call that arrived with headers or can answer with them).
func NewServerContext(ctx context.Context, sc *ServerCall) context.Context {
	return context.WithValue(ctx, serverKey{}, sc)
}

// IsServerCallKey tells whether key is the context key NewServerContext
// stores a *ServerCall under, for a server's own context type that holds
// the call directly instead of through context.WithValue.
func IsServerCallKey(key any) bool {
	_, ok := key.(serverKey)
	return ok
}

// ServerCallFrom returns the call's headers on a handler's context.
func ServerCallFrom(ctx context.Context) (*ServerCall, bool) {
	sc, ok := ctx.Value(serverKey{}).(*ServerCall)
	return sc, ok
}

// FromIncomingContext returns the headers the client sent with the call
// a handler's context belongs to (shared: do not change it).
func FromIncomingContext(ctx context.Context) (MD, bool) {
	sc, ok := ServerCallFrom(ctx)
	if !ok {
		return nil, false
	}
	in := sc.Incoming()
	return in, in != nil
}

// RequestID returns the request id of the call a handler's context belongs
// to, "" if the client sent none.
func RequestID(ctx context.Context) string {
	md, _ := FromIncomingContext(ctx)
	return md[RequestIDKey]
}

// SetReply adds reply headers to the call a handler's context belongs to.
// It reports false when the call has no way to carry them: plain Thrift,
// or a HatRPC call that arrived without headers (its client may not read
// any; a HatRPC client sends a request id unless told not to).
func SetReply(ctx context.Context, kv ...string) bool {
	sc, ok := ServerCallFrom(ctx)
	if !ok {
		return false
	}
	sc.SetReply(kv...)
	return true
}

type captureKey struct{}

// CaptureReply returns ctx whose call stores the server's reply headers in
// *md once the reply arrives (nil when it sent none).
func CaptureReply(ctx context.Context, md *MD) context.Context {
	return context.WithValue(ctx, captureKey{}, md)
}

// ReplyCapture returns the target set by CaptureReply (for transports).
func ReplyCapture(ctx context.Context) *MD {
	md, _ := ctx.Value(captureKey{}).(*MD)
	return md
}
