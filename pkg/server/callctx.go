package server

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/metadata"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// callCtx is the context of one HatRPC call. It replaces
// context.WithDeadline/WithCancel on the hot path: the deadline timer and the
// parent watch are only set up if the handler actually asks for Done, so a
// handler that never blocks on its context costs 72 bytes (they come from
// blocks, see ctxSlab), and ending its call takes no lock.
type callCtx struct {
	parent context.Context // the connection's context
	dl     time.Duration   // the deadline, since epoch (monotonic); 0: none
	// sc is the call's headers, if it has any: set before the handler
	// runs, or made from rid when first asked for (headers).
	sc atomic.Pointer[metadata.ServerCall]
	// rq is the call as ReserveReply sees it (replyroom.go): a TCP
	// connection's or FLOCK's request, or a dedicated lane's room
	// (lanereply.go: its request lives on a stack); nil for streams.
	rq    *request
	state atomic.Uint32 // ctxLive, or how the call ended
	// hasRID: the call's only header is the request id rid (the block a
	// HatRPC client sends with every call, wire.RequestIDOnly), kept as
	// its 16 bytes until a handler looks: most never do, and a ServerCall
	// made for every call (~150 bytes from the reader's slab) cost ~3 %
	// of a 64-caller TCP call's server CPU, most of it in the collector.
	hasRID bool
	w      atomic.Pointer[ctxWatch]
	rid    [wire.RequestIDSize]byte
}

// ctxWatch is what the first Done sets up: the channel and its watchers.
type ctxWatch struct {
	mu      sync.Mutex
	done    chan struct{}
	closed  bool
	timer   *time.Timer
	unwatch func() bool
}

// callCtx states.
const (
	ctxLive uint32 = iota
	ctxCanceled
	ctxDeadline
)

var _ context.Context = (*callCtx)(nil)

func newCallCtx(parent context.Context, timeout time.Duration) *callCtx {
	c := &callCtx{parent: parent}
	if timeout > 0 {
		c.dl = deadlineAt(time.Since(epoch), timeout)
	}
	return c
}

// deadlineAt is the deadline of a call that started at (since epoch) with
// the timeout, 0 for none: the clock read that times a lane's call also
// gives its deadline. A timeout too large to add (a peer may send up to
// 2^63-1 ns) saturates at the latest deadline instead of wrapping into the
// past, where the call would fail at once with DeadlineExceeded.
func deadlineAt(at, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	if timeout > math.MaxInt64-at {
		return math.MaxInt64
	}
	return at + timeout
}

// ctxSlab hands out call contexts carved from blocks, one allocation per
// ctxSlabSize calls instead of one a call. A context is never handed out
// twice: a handler may keep its context past the call, and it must go on
// reading as cancelled (a kept one pins its block, 1 KiB, no more). Only
// a dedicated lane reuses one, for a method whose handler promised to
// keep none (borrow_ctx: laneSession.borrowedCtx).
type ctxSlab struct {
	blk *[ctxSlabSize]callCtx
	i   int // the next one to hand out
}

// ctxSlabSize contexts of 72 bytes fill a 1 KiB size class (1,008
// bytes; a shared block's counter fits in the rest).
const ctxSlabSize = 14

func (s *ctxSlab) next(parent context.Context, dl time.Duration) *callCtx {
	if s.blk == nil || s.i == ctxSlabSize {
		s.blk, s.i = new([ctxSlabSize]callCtx), 0
	}
	c := &s.blk[s.i]
	s.i++
	c.parent, c.dl = parent, dl
	return c
}

// sharedSlab is ctxSlab for calls that run concurrently (the FLOCK
// session's, on its workers): each call claims its context with one atomic add, and
// whoever finds the block used up puts a fresh one in.
type sharedSlab struct{ blk atomic.Pointer[ctxBlock] }

type ctxBlock struct {
	claimed atomic.Int32
	ctxs    [ctxSlabSize]callCtx
}

func (s *sharedSlab) next(parent context.Context, dl time.Duration) *callCtx {
	for {
		b := s.blk.Load()
		if b != nil {
			if i := b.claimed.Add(1) - 1; i < ctxSlabSize {
				c := &b.ctxs[i]
				c.parent, c.dl = parent, dl
				return c
			}
		}
		nb := new(ctxBlock)
		nb.claimed.Store(1)
		if s.blk.CompareAndSwap(b, nb) {
			c := &nb.ctxs[0]
			c.parent, c.dl = parent, dl
			return c
		}
	}
}

// Deadline is the deadline on the monotonic clock, with the wall clock's
// reading of now: right even if the wall clock was set since the start.
func (c *callCtx) Deadline() (time.Time, bool) {
	if c.dl == 0 {
		return time.Time{}, false
	}
	now := time.Now()
	return now.Add(epoch.Add(c.dl).Sub(now)), true
}

// Value answers for the call's headers itself: one context.WithValue
// less per call that carries headers.
func (c *callCtx) Value(key any) any {
	if (c.hasRID || c.sc.Load() != nil) && metadata.IsServerCallKey(key) {
		return c.headers()
	}
	if _, ok := key.(replyRoomKey); ok && c.rq != nil {
		return c
	}
	return c.parent.Value(key)
}

// headers returns the call's headers, made from its request id on the
// first look when that is all it sent (whoever looks first makes them).
func (c *callCtx) headers() *metadata.ServerCall {
	if sc := c.sc.Load(); sc != nil || !c.hasRID {
		return sc
	}
	sc := metadata.NewServerCall(metadata.MD{metadata.RequestIDKey: string(c.rid[:])})
	if c.sc.CompareAndSwap(nil, sc) {
		return sc
	}
	return c.sc.Load()
}

func (c *callCtx) Done() <-chan struct{} {
	if w := c.w.Load(); w != nil {
		return w.done // closed, or will be when the call ends
	}
	w := &ctxWatch{done: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !c.w.CompareAndSwap(nil, w) {
		return c.w.Load().done
	}
	// Published before the state is looked at, as end sets the state
	// before it looks for a watch: one of the two closes the channel.
	if c.state.Load() == ctxLive {
		if why := c.expired(); why != ctxLive {
			c.state.CompareAndSwap(ctxLive, why)
		}
	}
	if c.state.Load() != ctxLive {
		w.closeLocked()
		return w.done
	}
	w.unwatch = context.AfterFunc(c.parent, func() { c.end(ctxCanceled) })
	if c.dl != 0 {
		w.timer = time.AfterFunc(c.dl-time.Since(epoch), func() { c.end(ctxDeadline) })
	}
	return w.done
}

func (c *callCtx) Err() error {
	s := c.state.Load()
	if s == ctxLive {
		// A parent cancellation or a passed deadline no watcher reported.
		why := c.expired()
		if why == ctxLive {
			return nil
		}
		c.end(why)
		s = c.state.Load()
	}
	if s == ctxDeadline {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// expired tells whether the parent ended or the deadline passed.
func (c *callCtx) expired() uint32 {
	if c.parent.Err() != nil {
		return ctxCanceled
	}
	if c.dl != 0 && time.Since(epoch) >= c.dl {
		return ctxDeadline
	}
	return ctxLive
}

func (c *callCtx) cancel(err error) {
	why := ctxCanceled
	if err == context.DeadlineExceeded {
		why = ctxDeadline
	}
	c.end(why)
}

// end ends the call's context for the reason why, unless it has ended.
func (c *callCtx) end(why uint32) {
	if !c.state.CompareAndSwap(ctxLive, why) {
		return
	}
	if w := c.w.Load(); w != nil {
		w.mu.Lock()
		w.closeLocked()
		w.mu.Unlock()
	}
}

func (w *ctxWatch) closeLocked() {
	if !w.closed {
		close(w.done)
		w.closed = true
	}
}

// release ends the call: watchers stop and the context reads as cancelled,
// like the CancelFunc of context.WithCancel.
func (c *callCtx) release() {
	c.end(ctxCanceled)
	w := c.w.Load()
	if w == nil {
		return // no channel, no watchers (a later Done sees the state)
	}
	w.mu.Lock()
	t, unwatch := w.timer, w.unwatch
	w.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if unwatch != nil {
		unwatch()
	}
}

// cancelTable finds a HatRPC connection's calls by frame seqid for Cancel
// frames. Only the reader adds, looks up and forgets, so it takes no lock:
// an ended call is not taken out by whoever ends it (two locked map
// updates a call, the reader's and the handler's) but left for the reader
// to drop once the table has doubled since it last looked (and when the
// connection goes idle with more than a few listed), its contexts read as ended meanwhile (a
// Cancel for one is a no-op: a connection's contexts are never reused,
// see ctxSlab).
type cancelTable struct {
	// ring holds a call at fseq mod cancelRing: a HatRPC client numbers
	// its calls one after another, so a call's place holds a call that
	// ended long ago, and taking it is a store instead of a map insert
	// (and, every doubling, a walk of the map to prune it). A call whose
	// place holds one still live goes to m. Made by the first call
	// (1 KiB): a plain Thrift connection has none.
	ring   *[cancelRing]cancelEntry
	inRing uint64 // which places of ring hold a call (bit i: ring[i])
	m      map[int32]*callCtx
	pruned int // live entries the last prune of m left
}

type cancelEntry struct {
	fseq int32
	c    *callCtx
}

// cancelRing is a power of two above the calls a client keeps in flight
// on one connection in the common case (the Conn spreads 64 callers over
// its connections: 16 or so each).
const cancelRing = 64

// pruneMin is the table size below which it is pruned only when idle,
// and then only past pruneIdle entries: at most pruneIdle ended contexts
// (pinning a block or two of ctxSlab's) stay with an idle connection,
// and a connection that goes idle after every few calls does not walk
// its table each time (1.9% of the server's samples at 4 KiB x 64
// callers when it did at every idle).
const (
	pruneMin  = 32
	pruneIdle = 8
)

func (t *cancelTable) add(fseq int32, c *callCtx) {
	if t.ring == nil {
		t.ring = new([cancelRing]cancelEntry)
	}
	i := uint32(fseq) % cancelRing
	if e := &t.ring[i]; e.c == nil || e.c.state.Load() != ctxLive {
		e.fseq, e.c = fseq, c
		t.inRing |= 1 << i
		return
	}
	if t.m == nil {
		t.m = map[int32]*callCtx{}
	}
	if len(t.m) >= max(pruneMin, 2*t.pruned) {
		t.prune()
	}
	t.m[fseq] = c
}

// find returns the call fseq names, nil when none is listed. An ended
// call may be returned: cancelling it is a no-op.
func (t *cancelTable) find(fseq int32) *callCtx {
	if t.ring != nil {
		if e := &t.ring[uint32(fseq)%cancelRing]; e.c != nil && e.fseq == fseq {
			return e.c
		}
	}
	return t.m[fseq]
}

// size is how many calls are listed, ended ones included.
func (t *cancelTable) size() int { return bits.OnesCount64(t.inRing) + len(t.m) }

// pruneAll forgets the calls that ended, in the ring too (an idle
// connection's: the ring's ended calls would pin their blocks).
func (t *cancelTable) pruneAll() {
	for b := t.inRing; b != 0; b &= b - 1 {
		i := bits.TrailingZeros64(b)
		if e := &t.ring[i]; e.c.state.Load() != ctxLive {
			*e = cancelEntry{}
			t.inRing &^= 1 << i
		}
	}
	t.prune()
}

// prune forgets the calls of m that ended.
func (t *cancelTable) prune() {
	for k, c := range t.m {
		if c.state.Load() != ctxLive {
			delete(t.m, k)
		}
	}
	t.pruned = len(t.m)
}
