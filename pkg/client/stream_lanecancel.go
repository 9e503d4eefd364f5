//go:build cgo && linux

package client

import (
	"context"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A stream on lanes canceled by its caller (its context canceled or past
// its deadline) gives its lanes back to the pool in step with the server,
// rather than closing them (a lane's setup is a new endpoint, on ibv a new
// QP). An exchange ended midway breaks its endpoint, so the stream's
// exchanges do not run under its context but under the runner's own
// (xctx), which only the cancel's bound ends; the stream ends on this side
// at once (its RecvMsg and SendMsg return), and the lanes follow once the
// server acknowledged (docs/design/streams-lanes.md):
//
//   - a poll the server holds is answered once the client's Cancel
//     (fastpath.Cancel, naming the stream's number on the lane) comes on
//     the lane's link: the server resets the stream, canceling its
//     handler, and answers the poll with a reset;
//   - otherwise (or after the poll came back with frames) the runner sends
//     a request of a reset frame, which the server files as the client's
//     reset and answers at once, leaving the stream.
//
// Either answer is the acknowledgement: the server sends nothing of the
// stream after it (its outbox is closed with it), so the lane's next
// exchange is the next stream's or call's. A server that does not answer
// within the bound (WithStreamCancelWait) has its exchange ended: the lane
// is closed, as before, and the server, seeing it go, ends its side.
//
// The Cancel goes only to a server that granted wire.CapLaneCancel in
// the lane's hello (clane.linkCancel): one of the previous version takes
// it for the client gone and closes the lane. To such a server a reset
// request acknowledges as above; a poll it holds is reached by nothing on
// the lane, so a server stream's lane closes as before the handshake (the
// exchange ended at once: waiting for the handler's next frame could take
// the whole bound, which the function's next stream would wait too), and
// a client or bidirectional stream's second lane carries the reset, which
// that server answers at once and files with the stream, answering the
// held poll with a reset: both lanes are kept.
//
// A server stream's caller may hold a borrowed message read in place in
// the lane's reply at the cancel (borrow_msgs): the lane's next exchange
// would overwrite it, so the lane is held (laneHold) until the message is
// back, and told on the link at once, where the server resets the stream
// (ending the handler) with no exchange; once the message is back, the
// reset request acknowledges and the lane goes back to the pool.

// laneCancel is a runner's side of the cancel handshake.
type laneCancel struct {
	xctx    context.Context // the stream's exchanges'
	xcancel context.CancelFunc
	wait    time.Duration
	hang    bool        // tests: act as if the server never answered (streamOptions.hangCancels)
	stop    func() bool // stops the watch on the stream's context

	// Under mu: canceled, once the stream's context ended; polling, while
	// the first lane's poll is (about to be) sent; seq, the stream's
	// number on the first lane (0: its open not sent); done, once the
	// runner gave its lanes back (a cancel then has nothing to do).
	canceled, polling, done bool
	seq                     uint32
	bound                   *time.Timer
	// draining: the lanes the stream holds that the pool counted as
	// coming back (lanePool.draining), from the cancel on.
	draining int32
}

// watchCancel makes the stream's context's end start the handshake.
func (r *laneRunner) watchCancel(ctx context.Context) {
	o := &r.cs.s.c.o.streams
	r.xctx, r.xcancel = context.WithCancel(context.Background())
	r.wait = o.cancelWait
	if r.wait <= 0 {
		r.wait = DefaultStreamCancelWait
	}
	r.hang = o.hangCancels
	if o.lateWatch {
		r.stop = func() bool { return true }
		return
	}
	r.stop = context.AfterFunc(ctx, r.onCancel)
}

// onCancel runs once the stream's context ended: a poll in flight is
// answered only by a Cancel on the link, and the bound starts.
func (r *laneRunner) onCancel() {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	if r.done || r.canceled { // once: the watcher, or cancelEnded before it
		return
	}
	r.canceled = true
	r.drainLocked()
	if r.polling && !r.hang {
		switch {
		case r.l.linkCancel:
			_ = r.l.link.SendCancel(r.seq) // a dead link: the lane is failing anyway
		case r.up == nil:
			// A server that does not know the link's Cancel: nothing
			// reaches its held poll, the lane closes (above).
			r.xcancel()
		}
		// (Else the second lane's reset answers the poll: upRunner.run.)
	}
	r.bound = time.AfterFunc(r.wait, r.xcancel)
}

// startDrain counts the stream's lanes as coming back to the pool, once
// its context ended (or RecvMsg returned its end, which may come first):
// the next stream or call of the function waits for them rather than
// set up new ones (lanePool.waitDrained). Nothing once the runner gave
// them back.
func (r *laneRunner) startDrain() {
	r.cmu.Lock()
	r.drainLocked()
	r.cmu.Unlock()
}

func (r *laneRunner) drainLocked() {
	if r.done || r.draining > 0 {
		return
	}
	r.draining = 1
	if r.up != nil {
		r.draining = 2
	}
	r.p.draining.Add(r.draining)
}

// opened numbers the stream on its first lane as its open goes (the
// server numbers the opens it reads alike).
func (r *laneRunner) opened() {
	r.cmu.Lock()
	r.l.streams++
	r.seq = r.l.streams
	r.cmu.Unlock()
}

// startPoll reports whether a poll may go: not once the stream was
// canceled, as no Cancel would then answer it.
func (r *laneRunner) startPoll() bool {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.polling = !r.canceled
	return r.polling
}

func (r *laneRunner) stopPoll() {
	r.cmu.Lock()
	r.polling = false
	r.cmu.Unlock()
}

// finish ends the handshake's watch and bound before the runner gives
// its lanes back: nothing of this stream's touches them after. It
// reports whether the stream was canceled.
func (r *laneRunner) finish() (canceled bool) {
	r.stop()
	r.p.untrack(r)
	r.cmu.Lock()
	r.done = true
	if r.bound != nil {
		r.bound.Stop()
	}
	canceled = r.canceled
	r.cmu.Unlock()
	r.xcancel()
	return canceled
}

// cancelReset is the reset frame a canceled stream's handshake sends.
func cancelReset(id int32, cause error) []byte {
	return wire.AppendResetFrame(nil, id, proto.ExcUnknown, "canceled: "+cause.Error())
}

// ack runs the handshake on the first lane once the stream's context
// ended: a request of a reset frame, whose answer is the server's
// acknowledgement. false: the server did not answer within the bound
// (or the lane failed), and the lane is out of step.
func (r *laneRunner) ack(cause error) bool {
	req := cancelReset(r.cs.id, cause)
	for {
		if r.hang {
			// As a server that never answers: a poll it holds.
			req = wire.AppendWindowFrame(req[:0], r.cs.id, 0, 0)
		}
		if _, err := r.exchange(r.xctx, r.l, req); err != nil {
			return false
		}
		if !r.hang {
			return true
		}
	}
}

// drain ends a canceled stream's one lane: back to the pool once the
// server acknowledged, closed when it did not within the bound.
func (r *laneRunner) drain(cause error) {
	r.startDrain()
	r.end(cause)
	if r.loan != nil && r.loan.Out() > 0 {
		// The caller still reads a message in the lane's reply, which the
		// next exchange would overwrite.
		if r.l.linkCancel {
			r.hold(cause)
			return
		}
		// A server without the link's Cancel learns of it only from the
		// lane's end: its link goes now, the rest once the message is
		// back (fail).
		r.finish()
		r.fail(cause, true)
		return
	}
	r.cmu.Lock()
	sent := r.seq != 0
	r.cmu.Unlock()
	kept := !sent || r.ack(cause)
	r.finish()
	r.giveBack(kept)
}

// giveBack puts the first lane back in the pool, closed unless kept.
func (r *laneRunner) giveBack(kept bool) {
	r.released(true, r.p.putCanceled(r.l, kept))
}

// putCanceled puts a canceled stream's first lane back, closed unless
// kept; it reports whether it was kept (the Conn closing marks it
// broken too).
func (p *lanePool) putCanceled(l *clane, kept bool) bool {
	if !kept {
		l.broken.Store(true)
	}
	kept = !l.broken.Load()
	p.put(l)
	return kept
}

// countCanceled counts a canceled stream's first lane kept or closed.
func (p *lanePool) countCanceled(kept bool) {
	if kept {
		p.ls.streamRoutes.kept.Add(1)
	} else {
		p.ls.streamRoutes.closed.Add(1)
	}
}

// hold ends the runner of a canceled server stream whose caller holds a
// borrowed message read in the lane's reply, leaving the lane to a
// laneHold until the message is back. The server is told on the link:
// it resets the stream at once, no exchange needed. The lane is not
// counted as coming back meanwhile: the caller may hold the message as
// long as it likes (for good, if it never gives it back: the lane then
// stays out of the pool, as any borrow not given back), and the
// function's next stream or call must not wait for it.
func (r *laneRunner) hold(cause error) {
	if !r.hang {
		_ = r.l.link.SendCancel(r.seq) // a dead link: the lane closes once the message is back
	}
	h := &laneHold{p: r.p, l: r.l, req: cancelReset(r.cs.id, cause), wait: r.wait, hang: r.hang}
	r.finish()
	// Before released: a message back meanwhile (back counts the lane
	// again) leaves no moment at which the lane counts as not coming
	// back, when a next stream would set up a new one.
	r.loan.Finally(h.back)
	r.released(false, false)
}

// laneHold is a canceled server stream's lane while its caller holds a
// borrowed message read in the lane's reply. It refers to nothing of the
// stream's: the stream's cleanup gives the message back once the stream
// is unreachable (a caller dropping it), which a reference from the loan
// to the stream would prevent.
type laneHold struct {
	p    *lanePool
	l    *clane
	req  []byte // the handshake's reset request
	wait time.Duration
	hang bool // tests: as a server that never answers
}

// back runs as the last message comes back (on the goroutine giving it
// back, the caller's RecvMsg or the stream's cleanup): from now the
// function's next stream or call waits for the lane (waitDrained), and
// the handshake runs on a goroutine of its own.
func (h *laneHold) back() {
	h.p.draining.Add(1)
	go h.giveBack()
}

// giveBack acknowledges the cancel with the reset request, within the
// bound, and puts the lane back; closed when the server did not answer,
// or when it failed or the Conn closed while the message was held (its
// endpoint, whose memory the message was read in, closes only now).
func (h *laneHold) giveBack() {
	kept := false
	if !h.hang && !h.l.broken.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), h.wait)
		_, err := h.p.streamExchange(ctx, h.l, h.req)
		cancel()
		kept = err == nil
	}
	h.p.countCanceled(h.p.putCanceled(h.l, kept))
	h.p.drained(1)
}

// drainDuplex is drain for a client or bidirectional stream's two lanes:
// the first carries the handshake; the second's exchange in hand is
// answered at once (the server never holds it), within the same bound.
func (r *laneRunner) drainDuplex(cause error, started bool) {
	r.startDrain()
	r.end(cause)
	r.closeDuplex(!started || r.ack(cause), started)
}

// closeDuplex gives a canceled stream's lanes back, the first closed
// unless kept (the second closes only if its own exchange failed).
func (r *laneRunner) closeDuplex(kept, started bool) {
	r.stopUp(started)
	r.finish()
	r.giveBack(kept)
}

// released runs once the runner gave its lanes back (after finish): the
// pool stops waiting for them, and, with count, the canceled stream's
// first lane is counted kept or closed (after the put: tests wait for
// the count to find the lane idle).
func (r *laneRunner) released(count, kept bool) {
	if count {
		r.p.countCanceled(kept)
	}
	if r.draining > 0 { // finish set done: startDrain no longer writes it
		r.p.drained(r.draining)
		r.draining = 0
	}
}

// waitDrained takes a lane a canceled stream is giving back (its
// handshake under way: one exchange, bounded by WithStreamCancelWait),
// rather than let the caller set up a new one: a caller that cancels a
// stream and opens the next at once would otherwise race the handshake
// and pay for a lane (on ibv a QP) it did not need. nil: none is coming
// back (or ctx ended).
func (p *lanePool) waitDrained(ctx context.Context) *clane {
	for p.draining.Load() > 0 {
		ch := p.drainSignal()
		if l := p.takeIdle(); l != nil {
			return l
		}
		if p.draining.Load() == 0 {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
	return p.takeIdle()
}

// drainSignal is closed by the next drained.
func (p *lanePool) drainSignal() <-chan struct{} {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	if p.dch == nil {
		p.dch = make(chan struct{})
	}
	return p.dch
}

// drained counts n lanes of a canceled stream back (in the pool, or
// closed) and wakes waitDrained.
func (p *lanePool) drained(n int32) {
	p.draining.Add(-n)
	p.dmu.Lock()
	if p.dch != nil {
		close(p.dch)
		p.dch = nil
	}
	p.dmu.Unlock()
}

// track counts r among the pool's live streams (until finish).
func (p *lanePool) track(r *laneRunner) {
	p.smu.Lock()
	if p.live == nil {
		p.live = make(map[*laneRunner]struct{})
	}
	p.live[r] = struct{}{}
	p.nlive.Store(int32(len(p.live)))
	p.smu.Unlock()
}

func (p *lanePool) untrack(r *laneRunner) {
	p.smu.Lock()
	delete(p.live, r)
	p.nlive.Store(int32(len(p.live)))
	p.smu.Unlock()
}

// cancelEnded starts the cancel of each live stream whose context ended
// but whose watcher (context.AfterFunc, on a goroutine of its own) has
// not run yet, so that its lanes count as coming back: a caller that
// cancels a stream and at once opens the next, before that goroutine
// ran, would otherwise set up a new lane (on ibv a QP) it did not need.
func (p *lanePool) cancelEnded() {
	if p.nlive.Load() == 0 {
		return
	}
	var ended []*laneRunner
	p.smu.Lock()
	for r := range p.live {
		if r.cs.ctx.Err() != nil {
			ended = append(ended, r)
		}
	}
	p.smu.Unlock()
	for _, r := range ended {
		r.onCancel()
	}
}
