package flock

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
)

// The doorbell. A client dispatcher whose response rings stayed empty for
// its spin window, while calls are outstanding, sleeps in C on an event CQ
// instead of napping on a Go timer (which, with the rest of the process
// idle, lasts about a millisecond whatever was asked: the netpoller's
// timeout has millisecond resolution) or spinning on a core the server
// needs. Before it
// sleeps it writes a new sleep epoch into a control word of the server's
// request ring (QP 0) and waits for that WRITE to complete; then it looks
// at its rings once more. A server leader, after a message of its has
// completed at the client, reads the word and, when the epoch is one it has
// not answered, wakes the client with a zero-length WRITE_WITH_IMM. Both
// sides write before they read, so the client either sees the message in
// its re-poll or the server sees the epoch: no wake-up is lost. A sleep
// still ends after bellSlice, so a lost server costs a look every few ms.

const (
	// ctlBell, in QP 0's request ring on the server: the client
	// dispatcher's sleep epoch.
	ctlBell = 16
	// bellRecvs receives stay posted on each client QP for wake-ups: the
	// server rings at most once per epoch, and a sleep that timed out can
	// leave one wake-up in flight when the next begins.
	bellRecvs = 4
	// bellSlice is the longest a dispatcher sleeps before it looks again.
	bellSlice = 5 * time.Millisecond
	// bellImm marks a wake-up WRITE_WITH_IMM; a credit renewal's immediate
	// is a coalescing degree, never this.
	bellImm = 0xffffffff
	// idleSlice bounds one sleep of a server dispatcher.
	idleSlice = time.Second
	// maxBellPeers: with more senders than this, a sleep (one epoch write
	// to each) waits until the rings have been quiet for bellQuiet per
	// maxBellPeers senders, so the writes are paid for by the naps they
	// save; until then an idle dispatcher naps.
	maxBellPeers = 64
	bellQuiet    = time.Millisecond
	// busyTries bounds the yields a server dispatcher waits for a leader
	// holding a sender's QP before it gives up telling that sender.
	busyTries = 32
)

// sleepResult is what a dispatcher's attempt to sleep came to.
type sleepResult uint8

const (
	slept     sleepResult = iota // slept, or found work after telling the peer
	sleepBusy                    // a leader holds the QP: try again after a yield
	sleepNo                      // cannot sleep now: nap instead
)

// bell is the client side, used by the dispatcher goroutine only.
type bell struct {
	cq    *rdma.CQ
	wcs   []rdma.Completion
	recv  [1]rdma.RecvWR
	node  *node
	epoch uint64
	buf   [8]byte
	ctx   context.Context // for the epoch WRITE: never cancelled
	slice deadline        // bounds a sleep; reused, so a sleep allocates nothing
	// sleeps and wakes count sleeps and the server's wake-ups (tests).
	sleeps, wakes uint64
}

func (c *Conn) openBell(dev *rdma.Device) error {
	cq, err := dev.CreateCQ(c.cfg.qps*bellRecvs+8, rdma.WithEvents())
	if err != nil {
		return err
	}
	c.undo = append(c.undo, cq.Close)
	c.bell = bell{cq: cq, wcs: make([]rdma.Completion, c.cfg.qps*bellRecvs), node: newNode(),
		ctx: context.Background(), slice: deadline{Context: context.Background()}}
	return nil
}

// armBell posts the wake-up receives once the QPs are connected.
func (c *Conn) armBell() error {
	for _, l := range c.qps {
		for i := 0; i < bellRecvs; i++ {
			if err := c.repost(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Conn) repost(l *clientQP) error {
	c.bell.recv[0] = rdma.RecvWR{WRID: uint64(l.idx)}
	return l.qp.PostRecv(c.bell.recv[:])
}

// sleep is the dispatcher's wait for the server once spinning stopped
// paying.
func (c *Conn) sleep() sleepResult {
	b := &c.bell
	var l *clientQP
	for _, cand := range c.qps {
		if cand.active.Load() {
			l = cand
			break
		}
	}
	if l == nil {
		return sleepNo
	}
	b.epoch++
	binary.LittleEndian.PutUint64(b.buf[:], b.epoch)
	n := b.node
	n.reclaim()
	n.reset()
	target := &c.qps[0].w.remote
	n.ctx, n.kind, n.raddr, n.rkey, n.data = b.ctx, opWrite, target.Addr+ctlBell, target.RKey, b.buf[:]
	// The dispatcher must never wait in a combining queue: a leader there
	// may be waiting for credits that only the dispatcher delivers. So it
	// writes the epoch only when the queue is idle.
	served := l.tryServeOne(n)
	n.free.Store(true) // served or not, this goroutine has it back
	if !served {
		return sleepBusy
	}
	if n.err != nil {
		return sleepNo
	}
	if c.poll() {
		return slept
	}
	b.sleeps++
	c.m.sleeps.Inc()
	b.slice.until = time.Now().Add(bellSlice)
	k, err := b.cq.Wait(&b.slice, b.wcs)
	if err != nil {
		return slept // slice over (or the CQ failed: the QPs report it)
	}
	for i := range b.wcs[:k] {
		wc := &b.wcs[i]
		if int(wc.WRID) < len(c.qps) && wc.Err() == nil {
			b.wakes++
			_ = c.repost(c.qps[wc.WRID])
		}
	}
	return slept
}

// ringIfAsleep wakes the peer's dispatcher if it went to sleep since the
// last wake-up; l's leader calls it after a message completed at the peer.
func (l *serverQP) ringIfAsleep() {
	p := l.p
	if claimEpoch(p.qps[0].req.b, &p.rung) && l.w.ring(p.s.ctx) == nil {
		p.s.m.wakeups.Inc()
	}
}

// claimEpoch reports whether the sleep epoch in ctl is one not answered
// yet, and records it as answered (so one leader of the peer rings).
func claimEpoch(ctl []byte, rung *atomic.Uint64) bool {
	e := load64(ctl, ctlBell)
	for {
		r := rung.Load()
		if e <= r {
			return false
		}
		if rung.CompareAndSwap(r, e) {
			return true
		}
	}
}

// ring posts the wake-up: a zero-length WRITE_WITH_IMM, which completes a
// receive at the peer. Leader only.
func (w *ringWriter) ring(ctx context.Context) error {
	w.wrs = append(w.wrs, rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWriteWithImm, Imm: bellImm,
		RemoteAddr: w.remote.Addr, RKey: w.remote.RKey})
	return w.post(ctx)
}

// The other direction. A server dispatcher whose request rings stayed
// empty for its (adaptive) spin sleeps instead of napping on Go timers
// (which last ~1 ms, and forever cost an idle server 5-12 % of a core): it
// writes a new sleep epoch into a control word of each sender's response
// ring (QP 0), polls once more, and blocks until a sender's wake-up arrives (a zero-length
// WRITE_WITH_IMM with bellImm, which the QP scheduler, waiting on the
// receive CQ anyway, passes on) or idleSlice passes. A sender's leader
// reads the word after each of its messages completed and rings when the
// epoch is new. Same write-then-read order on both sides as above.

func (s *Server) sleep(quiet time.Duration) sleepResult {
	s.mu.Lock()
	peers := append(s.sleepPeers[:0], s.peers...)
	s.mu.Unlock()
	s.sleepPeers = peers
	if len(peers) == 0 {
		// Nobody to serve: park until a sender connects (register nudges).
		s.m.sleeps.Inc()
		select {
		case <-s.stop:
		case <-s.bell:
		}
		return slept
	}
	if len(peers) > maxBellPeers && quiet < time.Duration(len(peers)/maxBellPeers)*bellQuiet {
		return sleepNo
	}
	s.bellEpoch++
	n := s.bellNode
	told := true // every sender has this epoch
	for _, p := range peers {
		// The epoch WRITE is posted, never waited for: a sender that died
		// may take a NIC's transport retries to fail it, and the
		// dispatcher serves everyone. A write still outstanding from an
		// earlier sleep means this sender cannot be told now, so the
		// dispatcher only naps; a failed one tears the sender down.
		l := p.qps[0]
		served := false
		// A leader holding the QP is usually done within a yield or two;
		// one that is not may be waiting on a dead peer: tell the others,
		// and look again after a nap.
		for try := 0; !served && try < busyTries; try++ {
			if try > 0 {
				runtime.Gosched()
			}
			n.reclaim()
			n.reset()
			n.ctx, n.kind, n.old = s.ctx, opWrite, s.bellEpoch
			n.arg1 = p.epochWR
			served = l.tryServeOne(n)
			n.free.Store(true)
		}
		if !served {
			told = false
			continue
		}
		if n.err != nil {
			continue // the sender is gone or going: nothing to tell it
		}
		p.epochWR = n.arg2
		if p.epochWR != 0 {
			told = false
		}
	}
	if s.poll() {
		return slept
	}
	slice := idleSlice
	if !told {
		slice = time.Millisecond
	}
	s.m.sleeps.Inc()
	t := time.NewTimer(slice)
	defer t.Stop()
	s.asleep.Store(told)
	select {
	case <-s.stop:
	case <-s.bell:
	case <-t.C:
	}
	s.asleep.Store(false)
	return slept
}

// postEpoch is a leader's work for the dispatcher's epoch node: one WRITE
// of the epoch into the sender's QP-0 response ring, posted without
// waiting. n.arg1 is the epoch write still outstanding from before (0:
// none); n.arg2 returns the one now outstanding (0: it completed).
func (l *serverQP) postEpoch(n *node) {
	w := &l.w
	pending := n.arg1
	n.arg2 = 0
	if pending != 0 {
		if n.err = w.reap(); n.err != nil {
			return
		}
		if w.done < pending {
			n.arg2 = pending // not yet: the peer cannot be told this epoch
			return
		}
	}
	binary.LittleEndian.PutUint64(w.sb[stageBell:], n.old)
	wr := rdma.SendWR{WRID: w.nextID(), Opcode: rdma.OpRDMAWrite, NumSGE: 1,
		RemoteAddr: w.remote.Addr + ctlBell, RKey: w.remote.RKey}
	wr.SG[0] = w.stage.SGE(stageBell, 8)
	w.wrs = append(w.wrs, wr)
	id, err := w.postAsync()
	if n.err = err; err != nil {
		return
	}
	// shm executes the write in the post: usually done already.
	if n.err = w.reap(); n.err == nil && w.done < id {
		n.arg2 = id
	}
}

// wakeServer rings the server if its dispatcher went to sleep since the
// last wake-up; l's leader calls it after a message completed.
func (l *clientQP) wakeServer() {
	c := l.c
	if claimEpoch(c.qps[0].resp.b, &c.srvRung) {
		_ = l.w.ring(c.bell.ctx)
	}
}

// tryServeOne serves n alone if nobody is serving this QP now.
func (l *serverQP) tryServeOne(n *node) bool {
	return tryServeOne(l.p.s.cfg.mutexShared, &l.mu, &l.comb, n)
}

// tryServeOne serves n through comb (or, in the mutex-shared baseline,
// under mu) if nobody is serving the QP now, and reports whether it did.
func tryServeOne(mutexShared bool, mu *sync.Mutex, comb *combiner, n *node) bool {
	if mutexShared {
		if !mu.TryLock() {
			return false
		}
		defer mu.Unlock()
		comb.serve([]*node{n})
		return true
	}
	return comb.tryLeadOne(n)
}

// deadline is its parent context that also ends at a time, without the
// timer of context.WithTimeout (which allocates per wait); for CQ.Wait,
// which only asks Err and Deadline. Its Done is the parent's.
type deadline struct {
	context.Context
	until time.Time
}

func (d *deadline) Deadline() (time.Time, bool) { return d.until, true }

func (d *deadline) Err() error {
	if err := d.Context.Err(); err != nil {
		return err
	}
	if time.Now().Before(d.until) {
		return nil
	}
	return context.DeadlineExceeded
}
