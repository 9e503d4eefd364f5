package wire

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// Large message buffers (from largeMin up to maxPooledBuf) live in their
// own pool, in size classes, and survive garbage collections.
//
// Why not sync.Pool: a workload of large messages allocates so fast that
// the collector runs every few milliseconds, and a sync.Pool is emptied by
// every second cycle. Each call then allocated fresh frame buffers, and
// the runtime hands out large objects from pages its scavenger returned to
// the OS in the meantime: profiled at 128 KiB, most of the CPU of
// decoding and of the read syscalls was page faults on such fresh memory
// (24 faults per call). A buffer that is reused stays mapped and in cache.
//
// Classes are multiples of largeStep; a class keeps its most recently
// returned buffers first (LIFO: the warmest in cache).
//
// How much to keep: buffers that decoded values adopted come back only
// when a collection finds them unused (Adopt), so a steady stream of large
// calls needs the buffers in flight plus those freed by one collection.
// At 64 concurrent 128 KiB echoes that was more than a 32 MiB pool held:
// each process allocated (and zeroed, and page-faulted in) fresh buffers
// every cycle, and raising the bound to 128 MiB took 167-178 µs of CPU per
// call to 153-158 µs (atb-tcp, 2026-11-23; 256 MiB was worse again). So
// the hard bounds are generous (largeRetain bytes, largePerClass buffers a
// class, so sizes nobody asks for any more cannot crowd out those in use),
// and what is kept is trimmed to demand instead: after every collection a
// class drops the buffers it did not hand out since the one before (its
// low-water mark), oldest first. A burst of large messages therefore pins
// memory for at most two collections once it ends.
const (
	largeMin      = 32 << 10
	largeStep     = 16 << 10
	largeRetain   = 128 << 20
	largePerClass = 1024
)

type largeClass struct {
	mu   sync.Mutex
	bufs [][]byte
	low  int // fewest buffers held since the last trim
}

var (
	largeClasses [maxPooledBuf/largeStep + 1]largeClass
	largeHeld    atomic.Int64 // bytes retained by largeClasses
)

// getLarge returns an empty buffer with capacity at least n (largeMin <= n
// <= maxPooledBuf): a pooled one, or a new one rounded up to its class.
func getLarge(n int) []byte {
	c := (n + largeStep - 1) / largeStep
	// Class n/largeStep may hold a buffer just big enough (buffers grown
	// by append are filed by their odd capacity); every buffer of class c
	// or c+1 fits, and looking one further keeps a workload whose sizes
	// straddle a class boundary from allocating.
	for k := n / largeStep; k <= min(c+1, len(largeClasses)-1); k++ {
		lc := &largeClasses[k]
		lc.mu.Lock()
		if m := len(lc.bufs); m > 0 && cap(lc.bufs[m-1]) >= n {
			b := lc.bufs[m-1]
			lc.bufs[m-1] = nil
			lc.bufs = lc.bufs[:m-1]
			lc.low = min(lc.low, m-1)
			lc.mu.Unlock()
			largeHeld.Add(-int64(cap(b)))
			return b[:0]
		}
		lc.mu.Unlock()
	}
	return make([]byte, 0, c*largeStep)
}

// putLarge keeps b (cap(b) >= largeMin) for reuse unless the pool is
// full; it reports whether it kept b.
func putLarge(b []byte) bool {
	if cap(b) < largeMin || cap(b) > maxPooledBuf {
		return false
	}
	if largeHeld.Add(int64(cap(b))) > largeRetain {
		largeHeld.Add(-int64(cap(b)))
		return false
	}
	trimOnce.Do(armTrim)
	// Filed by the class every size of which it can hold.
	lc := &largeClasses[cap(b)/largeStep]
	lc.mu.Lock()
	if len(lc.bufs) >= largePerClass {
		lc.mu.Unlock()
		largeHeld.Add(-int64(cap(b)))
		return false
	}
	lc.bufs = append(lc.bufs, b[:0])
	lc.mu.Unlock()
	return true
}

var (
	trimOnce sync.Once
	trims    atomic.Int64   // trims done, for tests
	adopted  atomic.Uintptr // the last adopted buffer its finalizer put back in the pool, for tests
)

// gcMark is an object whose only purpose is to be collected: its cleanup
// trims the pool and makes the next one, so the pool is trimmed once per
// collection. (It holds a pointer and is not tiny: the tiny allocator
// could keep it alive alongside other objects.)
type gcMark struct {
	_ *gcMark
	_ [2]uintptr
}

// armTrim makes the next mark before trimming: a collection that runs
// once a trim is counted then always has a mark to collect (made after,
// a test's collection that came in between found none and waited for
// a trim that only the next collection would bring).
func armTrim() {
	runtime.AddCleanup(new(gcMark), func(struct{}) {
		armTrim()
		trimLarge()
	}, struct{}{})
}

// trimLarge drops, in every class, the buffers not handed out since the
// last trim: they were not needed for a whole collection cycle.
func trimLarge() {
	defer trims.Add(1)
	for i := range largeClasses {
		lc := &largeClasses[i]
		lc.mu.Lock()
		n := lc.low
		if n > 0 {
			var freed int64
			for _, b := range lc.bufs[:n] {
				freed += int64(cap(b))
			}
			// The oldest (coldest) are at the bottom of the stack.
			k := copy(lc.bufs, lc.bufs[n:])
			clear(lc.bufs[k:])
			lc.bufs = lc.bufs[:k]
			largeHeld.Add(-freed)
		}
		lc.low = len(lc.bufs)
		lc.mu.Unlock()
	}
}

// TrimPool drops the pooled large buffers not handed out since the last
// trim (as after a collection): a server calls it when a burst of large
// requests ended, before returning freed memory to the OS.
func TrimPool() { trimLarge() }

// GetBufSize returns an empty pooled buffer with room for n bytes: for
// large n from the size-classed pool, else as GetBuf. Encoders that know
// (or can guess) the size of what they write use it so a large message is
// not built by growing a small buffer into fresh memory.
func GetBufSize(n int) *[]byte {
	if n < largeMin || n > maxPooledBuf {
		return GetBuf()
	}
	b := getLarge(n)
	return &b
}

// SizeHint remembers the size of the last message of a stream of similar
// ones (a connection's requests, a method's replies), so the next one is
// encoded into a pooled buffer of about its size instead of growing a
// small buffer into fresh memory. The zero value is ready to use.
//
// It also keeps an estimate of the next message's size from above (Max):
// the largest noted, but drawn an eighth of the way towards each smaller
// one noted after it. A server reserves a method's replies by it
// (pkg/server/replygate.go): with the largest reply so far, one large
// reply made every later small one of the method reserve the large size,
// so under a tight memory budget small calls waited for room (or were
// answered "server busy") ever after. Decayed, one large reply counts
// for a few dozen replies: after 40 replies of 1 KB, one of 400 KB
// weighs less than 2 KB more. A larger message raises it at once.
type SizeHint struct{ n, max atomic.Int32 }

// Max returns the estimate from above of the next message's size (0:
// none noted yet).
func (h *SizeHint) Max() int { return int(h.max.Load()) }

// maxDecay is the share (1/maxDecay) of the way towards a smaller
// message that Max moves per message.
const maxDecay = 8

// Large reports whether the last message was large enough for Buf to
// take its buffer from the size-classed pool.
func (h *SizeHint) Large() bool {
	n := int(h.n.Load())
	return n >= largeMin && n <= maxPooledBuf
}

// Small reports whether *b is a buffer of the small pool (GetBuf's): an
// owner may keep it for its next message instead of pooling it.
func Small(b *[]byte) bool { return cap(*b) < largeMin }

// Buf returns an empty pooled buffer sized like the last message.
func (h *SizeHint) Buf() *[]byte { return GetBufSize(int(h.n.Load())) }

// Note records the size of the message just encoded.
func (h *SizeHint) Note(size int) {
	// Store only on change: the hint is shared by concurrent callers, and
	// a steady size then costs no cache-line write.
	n := int32(min(size, 1<<30))
	if h.n.Load() != n {
		h.n.Store(n)
	}
	for m := h.max.Load(); m != n; m = h.max.Load() {
		next := n
		if n < m {
			// Rounded up, so it reaches n (and stops being written).
			next = m - (m-n+maxDecay-1)/maxDecay
		}
		if h.max.CompareAndSwap(m, next) {
			return
		}
	}
}

// growInto makes sure *bp can hold n bytes without growing, swapping a
// too-small buffer for a pooled large one; used before reading a frame
// whose size is known.
func growInto(dst []byte, n int) []byte {
	if cap(dst) >= n || n < largeMin || n > maxPooledBuf {
		return dst
	}
	if cap(dst) > 0 {
		small := dst[:0]
		if cap(small) >= largeMin {
			putLarge(small)
		} else {
			bufPool.Put(&small)
		}
	}
	return getLarge(n)
}

// AliasMin is the message size from which DecodeAliased pays off: below
// it a copy of the binary fields costs less than the buffer's detour
// through the garbage collector.
const AliasMin = largeMin

// DecodeAliased decodes like Decode but lets binary fields alias body
// instead of copying them out. The buffer body lives in must then be
// handed to Adopt, never to PutBuf: decoded values keep using it.
//
// At 128 KiB the copy was the costliest step of a call: each copy went to
// fresh memory the runtime had just returned to the OS, paying a page
// fault per 4 KiB on top of the memmove. Aliasing drops the copy; Adopt
// brings the buffer back into the pool once nothing uses it any more.
func (c *Codec) DecodeAliased(p proto.Protocol, body []byte, lim *proto.Limits, s proto.Struct) error {
	return c.decode(p, body, lim, s, true)
}

// Release disposes of the buffer a message was decoded from: handed to
// Adopt when the decode aliased it (DecodeAliased), else back to the pool.
func Release(bp *[]byte, aliased bool) {
	if aliased {
		Adopt(bp)
		return
	}
	PutBuf(bp)
}

// Adopt gives up the pool's claim on *bp (and clears it): values decoded
// by DecodeAliased own the buffer now. A pool-sized buffer returns to the
// pool when the collector finds no reference to any byte of it; the
// finalizer runs only then, so nothing decoded can see it reused.
func Adopt(bp *[]byte) {
	if bp == nil {
		return
	}
	b := *bp
	*bp = nil
	c := cap(b)
	if c < largeMin || c > maxPooledBuf {
		return // the collector frees it like any other slice
	}
	// Every large buffer starts its own heap object (made by make or
	// append, or recycled whole below), as SetFinalizer requires.
	runtime.SetFinalizer(unsafe.SliceData(b[:1]), func(p *byte) {
		if putLarge(unsafe.Slice(p, c)[:0]) {
			adopted.Store(uintptr(unsafe.Pointer(p)))
		}
	})
}
