package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// The request memory budget.
//
// Every message may be 64 MiB and there may be 10,000 connections: 24
// connections each sending most of a 60 MiB frame took a server from
// 0.67 to 2.46 GB (issue 18). So a request of wire.ChargeMin bytes or
// more is admitted before its buffer is allocated, against a server-wide
// budget and a per-connection cap, and holds its share until its call
// ends. Smaller requests are not counted: their memory is bounded by the
// connections and call slots (a few KiB each). Replies, small ones
// included, are charged too (replygate.go).
//
// A request that does not fit waits (its reader stops reading, so TCP
// pushes back on its client) while other connections go on; one that
// never could fit is refused as oversized. Waiting is the server's doing,
// so the time limits do not count it against the client (phase busy).
//
// Memory is given back after bursts: once requests over giveBackMin
// released half the budget since the last time, or the last admitted
// request ended after some did, a background goroutine trims the buffer pool and returns
// freed memory to the OS (debug.FreeOSMemory), at most once per
// giveBackEvery. Without that, 2.46 GB stayed resident after the 60 MiB
// frames' connections were gone.

// errOverBudget: a request larger than the budget or the per-connection cap.
var errOverBudget = fmt.Errorf("server: request larger than the memory budget: %w", proto.ErrSizeLimit)

// errBudgetWait: a request waited WithBusyTimeout for memory.
var errBudgetWait = errors.New("server busy: request memory budget exhausted")

const giveBackEvery = time.Second

// giveBackMin is the request size from which a request's memory counts
// towards a give-back: larger buffers are not pooled (wire.GetBufSize),
// each is fresh memory the heap keeps after its call.
const giveBackMin = 1 << 20

type budget struct {
	total, perConn int64
	fastMax        int64 // what the fast path's connections may hold together (WithFastPathShare)

	mu       sync.Mutex
	used     int64
	fastPath int64         // what connections of the fast path hold of used (fastMax)
	changed  chan struct{} // closed and replaced when memory is released, if anyone waits
	waiters  int           // goroutines waiting on changed
	released int64         // bytes released since the last give-back
	sinceGC  int64         // bytes of large requests released since the last forced collection
	gcing    bool          // a forced collection runs: admissions wait for it
	again    bool          // give back once more when the budget next empties (giveBackAgain)

	kick  chan struct{} // wakes the give-back goroutine
	gives atomic.Int64  // give-backs done, for tests
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func (b *budget) init(total, perConn int64, fastShare float64) {
	b.total, b.perConn = total, perConn
	if b.perConn <= 0 || b.perConn > total {
		b.perConn = total
	}
	if fastShare <= 0 || fastShare > 1 { // refused by Serve (checkFastPathShare)
		fastShare = DefaultFastPathShare
	}
	b.fastMax = int64(float64(total) * fastShare)
	b.changed = make(chan struct{})
	b.kick = make(chan struct{}, 1)
	b.quit = make(chan struct{})
}

func (b *budget) inUse() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.used)
}

// acquire admits n bytes for c, waiting while they do not fit (at most
// wait, if > 0) or until c's context ends.
func (b *budget) acquire(c *conn, n int64, wait time.Duration) error {
	if b.total <= 0 {
		return nil
	}
	if n > b.perConn || n > b.total {
		return errOverBudget
	}
	var timer <-chan time.Time
	for {
		b.mu.Lock()
		if b.fits(c, n) {
			b.take(c, n)
			if n <= giveBackMin || b.sinceGC < b.total/8 {
				b.mu.Unlock()
				return nil
			}
			// The buffers of large requests that ended are garbage the
			// heap holds until its next collection, which with the
			// budget's requests live comes only once the heap doubled:
			// 24 connections sending 60 MiB frames peaked at +435 MB
			// under a 256 MiB budget. Collect before allocating anew,
			// and let no other large request allocate meanwhile.
			b.sinceGC = 0
			b.gcing = true
			b.mu.Unlock()
			runtime.GC()
			b.mu.Lock()
			b.gcing = false
			b.wakeLocked()
			b.mu.Unlock()
			return nil
		}
		if err := b.wait(c, &timer, wait); err != nil {
			return err
		}
	}
}

// wait waits, with b.mu held (and released on return), until memory is
// released, c's context ends or the timer, started on the first wait if
// d > 0, fires (errBudgetWait).
func (b *budget) wait(c *conn, timer *<-chan time.Time, d time.Duration) error {
	ch := b.changed
	b.waiters++
	b.mu.Unlock()
	if *timer == nil && d > 0 {
		*timer = time.After(d)
	}
	var err error
	select {
	case <-ch:
	case <-*timer:
		err = errBudgetWait
	case <-c.ctx.Done():
		err = context.Cause(c.ctx)
	}
	b.mu.Lock()
	b.waiters--
	b.mu.Unlock()
	return err
}

// fits reports whether n more bytes fit c's share and the budget; b.mu
// is held.
func (b *budget) fits(c *conn, n int64) bool {
	return !b.gcing && b.used+n <= b.total && c.memHeld+n <= b.perConn &&
		(!c.fastPath.Load() || b.fastPath+n <= b.fastMax)
}

// roomLocked is what c may take of the budget now; b.mu is held.
func (b *budget) roomLocked(c *conn) int64 {
	room := min(b.perConn-c.memHeld, b.total-b.used)
	if c.fastPath.Load() {
		room = min(room, b.fastMax-b.fastPath)
	}
	return room
}

// take charges n bytes to c (n < 0: gives them back without waking
// anyone); b.mu is held.
func (b *budget) take(c *conn, n int64) {
	b.used += n
	c.memHeld += n
	if c.fastPath.Load() {
		b.fastPath += n
	}
}

// The connections of the fast path (lanes, FLOCK sessions) together hold
// at most a share of the budget (WithFastPathShare, by default
// DefaultFastPathShare, a quarter): 200 Scans batched on 7 lanes
// held all of it (each lane's batch up to its 64 MiB share), and a TCP
// client's Get waited 10 s for room. The rest stays for TCP clients, and
// a fast-path reply never waits for TCP's. A half still let the heap grow
// past the budget and its headroom (+345 MB of RssAnon: the garbage the
// batches leave is the heap's, which the collector lets grow to twice
// what is live); a quarter is 64 MiB of the default budget, a lane's
// largest reply. A server whose clients are mostly on the fast path
// gives it more (WithFastPathShare).

// markFastPath counts what c holds, and will hold, as the fast path's
// (its connection became a lane or FLOCK session).
func (b *budget) markFastPath(c *conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.fastPath.Swap(true) {
		b.fastPath += c.memHeld
	}
}

// wakeLocked wakes the goroutines waiting for memory, if any (closing
// and remaking the channel costs an allocation, so not on every call);
// b.mu is held.
func (b *budget) wakeLocked() {
	if b.waiters > 0 {
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

// release gives back n bytes c held.
func (b *budget) release(c *conn, n int64) {
	if n <= 0 || b.total <= 0 {
		return
	}
	b.mu.Lock()
	giveBack := b.freeLocked(c, n)
	b.mu.Unlock()
	if giveBack {
		b.giveBack()
	}
}

// freeLocked gives back n bytes c held and reports whether memory is
// to be returned to the OS now; b.mu is held.
func (b *budget) freeLocked(c *conn, n int64) bool {
	if n <= 0 {
		return false
	}
	b.used -= n
	c.memHeld -= n
	if c.fastPath.Load() {
		b.fastPath -= n
	}
	if n > giveBackMin {
		b.released += n // smaller requests come from and go back to the buffer pool
		b.sinceGC += n
	}
	b.wakeLocked()
	giveBack := b.released >= b.total/2 || b.used == 0 && (b.released > 0 || b.again)
	if giveBack {
		b.released, b.again = 0, false
	}
	return giveBack
}

// giveBackAgain returns memory to the OS now, and once more when the
// budget next empties. A connection that failed (checkWrite) drops the
// replies it was owed only as its calls end: connections closed together
// kick one give-back, whose collection may still see their replies live
// and then sets the heap's goal at twice that, which other clients'
// garbage fills again (RSS follows the goal). Small replies, which do
// not count towards a give-back, would then trigger none.
func (b *budget) giveBackAgain() {
	b.mu.Lock()
	b.again = true
	b.mu.Unlock()
	b.giveBack()
}

// giveBack asks the give-back goroutine to return memory to the OS.
func (b *budget) giveBack() {
	b.once.Do(func() {
		b.wg.Add(1)
		go b.giver()
	})
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// giver returns memory to the OS when kicked, at most once per
// giveBackEvery (a kick meanwhile is served after the pause).
func (b *budget) giver() {
	defer b.wg.Done()
	for {
		select {
		case <-b.quit:
			return
		case <-b.kick:
		}
		wire.TrimPool()
		debug.FreeOSMemory()
		b.gives.Add(1)
		select {
		case <-b.quit:
			return
		case <-time.After(giveBackEvery):
		}
	}
}

func (b *budget) stop() {
	b.once.Do(func() {}) // no giver can start after this
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	b.wg.Wait()
}

// charge is the wire.Charge of c's reader: it admits n more bytes of the
// message being read.
func (c *conn) charge(n int) error {
	// Waiting for memory is not the client's doing: the time limits skip
	// it, and the message's clock resumes where it stopped.
	ph, since, t0 := c.phase.Load(), c.since.Load(), c.s.clock.Load()
	c.phase.Store(phBusy)
	err := c.s.budget.acquire(c, int64(n), c.s.opts.busyTimeout)
	c.since.Store(since + c.s.clock.Load() - t0)
	c.phase.Store(ph)
	if err == nil {
		c.charging += int64(n)
	}
	return err
}

// takeCharge hands the memory charged for the message just read to its
// request (or releases it when there is none).
func (c *conn) takeCharge() int64 {
	n := c.charging
	c.charging = 0
	return n
}

// releaseCharge gives back what was charged for a message that does not
// become a request.
func (c *conn) releaseCharge() {
	if n := c.takeCharge(); n > 0 {
		c.s.budget.release(c, n)
	}
}

// overBudget handles a message whose memory was refused after waiting
// WithBusyTimeout: when its length is known it is skipped and a call
// answered "server busy", and overBudget reports true (the connection
// goes on). Otherwise the read error stands: a message that can never fit
// is answered like an oversized one, and the connection closes. h is a
// HatRPC frame's header, nil for a framed plain message.
func (c *conn) overBudget(err error, h *wire.Header) bool {
	if !errors.Is(err, errBudgetWait) {
		return false
	}
	c.s.met.rejected.WithLabelValues("memory_budget").Inc()
	var ce *wire.ChargeError
	if !errors.As(err, &ce) {
		return false // unframed: where the message ends is unknown
	}
	exc := proto.NewApplicationException(proto.ExcInternalError, errBudgetWait.Error())
	if h != nil {
		if wire.Discard(c.br, ce.Size) != nil {
			return false
		}
		if h.Kind == wire.KindCall {
			c.reply(&replyTo{hat: true, proto: h.Protocol(), seqid: h.Seqid, fseq: h.Seqid}, proto.Exception, exc, nil)
		}
		if h.Kind == wire.KindStreamData && c.st != nil { // a stream cannot lose a message: it is reset
			c.st.Discarded(int64(h.PayloadLen()))
			c.resetStream(c.sw, h.Seqid, c.st.Get(h.Seqid), proto.ExcInternalError, errBudgetWait)
		}
		return true
	}
	// A framed plain message: its header names whom to answer.
	head, _ := c.br.Peek(min(ce.Size, 512))
	mh, p, herr := c.plainMsgHeader(c.format.Proto, head)
	if wire.Discard(c.br, ce.Size) != nil {
		return false
	}
	if herr == nil && mh.Type == proto.Call {
		c.replyNow(&replyTo{proto: p, name: string(mh.Name), seqid: mh.Seqid}, proto.Exception, exc, nil)
	}
	return true
}
