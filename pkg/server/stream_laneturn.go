//go:build cgo && linux

package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// The handler's turn (docs/design/streams-lanes.md): a server stream's
// lane holding a lent poll offers its next exchange to the handler and
// parks; the handler, at its wait for credit (streamcore.Driver), sends
// the poll's reply, waits in C for the client's next request and, when
// that is credit ending in a poll, files it itself and offers the turn
// to itself again. The credit then finds the handler running: no
// goroutine is readied, no thread woken, between the client's credit
// and the handler's next message (each such hand-off a thread woken on
// a busy host: docs/performance/history.md, "The server's half of the
// hand-offs"). Any other request (an end, a reset, the next stream's
// open) goes back to the lane's goroutine unfiled, which answers it as
// any request. Only one goroutine runs the endpoint's exchange at a
// time: the one that moved the turn's state word.

const (
	turnLane    = iota // the lane's goroutine drives the endpoint
	turnOffered        // it holds a lent poll and offers the exchange
	turnHandler        // the handler runs it
)

// turnHold bounds how long an offered poll waits for the handler: frames
// the handler wrote and then did not wait for credit (a slow producer,
// a handler busy elsewhere) go by the lane's goroutine after it. The
// handler's end ends the wait at once (Finished). A variable for tests
// (SetTurnHold).
var turnHold = 250 * time.Microsecond

// turnMin is the message size from which the handler is offered the
// turn: a stream of smaller messages spends its time encoding and
// decoding them, and gains more from the lane sending one reply while
// the handler fills the next than from the hand-off saved (64 B streams
// were behind without a bound in 11 of 16 rounds, 4 KiB ones ahead in 7
// of 8 with this one: docs/performance/history.md, "The handler's
// turn").
const turnMin = 4 << 10

// laneTurn is a lane's turn state (laneStream.turn).
type laneTurn struct {
	state atomic.Int32
	gen   atomic.Uint32 // the lane's streams so far: whose the turn is
	size  atomic.Int64  // the message the handler last waited to send
	// at is when the turn was last offered (ns since epoch): the hold
	// counts from there
	at   atomic.Int64
	kick chan struct{} // the turn is back with the lane's goroutine
	hold *time.Timer

	// Handed with the turn (the state word orders them):
	lent    bool   // the held poll's reply memory is lent (streamCall)
	pending []byte // a request the handler took and did not file
	await   bool   // the handler replied, its wait for the next request ended early
	failed  bool   // the handler's exchange failed
}

// laneDriver is the streamcore.Driver of a lane's stream, the gen'th.
// A sender of a stream the lane left (one past its check of the
// stream's end) takes no turn of the next stream's.
type laneDriver struct {
	ls  *laneSession
	gen uint32
}

// newDriver returns the driver of the lane's next stream.
func (ls *laneSession) newDriver() laneDriver {
	t := &ls.stream.turn
	if t.kick == nil {
		t.kick = make(chan struct{}, 1)
	}
	t.size.Store(0)
	return laneDriver{ls, t.gen.Add(1)}
}

func (d laneDriver) Drive(ctx context.Context, size int64) bool {
	return d.ls.driveTurn(ctx, d.gen, size)
}

func (d laneDriver) Finished() {
	if d.ls.stream.turn.gen.Load() == d.gen {
		d.ls.kickTurn()
	}
}

// offersTurn reports whether a lent poll is offered to the handler.
func (ls *laneSession) offersTurn() bool {
	return ls.l.ep != nil && !ls.l.viaFLOCK && ls.stream.turn.size.Load() >= turnMin &&
		ls.c.st.Len() > 0 && !ls.cancelAsked()
}

// offerTurn parks the lane's goroutine, holding a lent poll, until the
// turn is back: done reports a reply for the request the handler handed
// back unfiled (or an empty answer after a failed exchange, which
// ServeCalls then fails to send); otherwise the poll, still held with
// *lent as the handler left it, is the lane's again.
func (ls *laneSession) offerTurn(lent *bool) (b []byte, pr rdma.Protocol, done bool) {
	t := &ls.stream.turn
	if t.hold == nil {
		t.hold = time.NewTimer(turnHold)
	} else {
		t.hold.Reset(turnHold)
	}
	select {
	case <-t.kick:
	default:
	}
	t.lent, t.pending, t.await, t.failed = *lent, nil, false, false
	t.at.Store(int64(time.Since(epoch)))
	t.state.Store(turnOffered)
	if ls.c.st.Len() == 0 {
		t.state.CompareAndSwap(turnOffered, turnLane) // finished meanwhile
	}
	// A handler that filled its window while the lane filed this poll
	// found no turn offered and waits for credit, which only this
	// exchange brings: it looks again.
	ls.c.st.Redrive()
	ctxDone := ls.c.ctx.Done()
	// Until the turn is back: the handler running the exchange hands it
	// back by a kick; the lane takes it back, while it is offered, at a
	// cancel, the connection's end or the hold's.
	for t.state.Load() != turnLane {
		select {
		case <-t.kick:
		case <-ls.cancels:
			t.state.CompareAndSwap(turnOffered, turnLane)
		case <-ctxDone:
			ctxDone = nil
			t.state.CompareAndSwap(turnOffered, turnLane)
		case <-t.hold.C:
			// The handler may have offered the turn again since: the
			// hold counts from its last offer.
			if left := turnHold - (time.Since(epoch) - time.Duration(t.at.Load())); left > 0 {
				t.hold.Reset(left)
			} else {
				t.state.CompareAndSwap(turnOffered, turnLane)
			}
		}
	}
	t.hold.Stop()
	*lent = t.lent
	if t.await && !t.failed {
		// The handler's context ended while it waited for the request
		// after its reply: the lane waits for it.
		t.await = false
		if t.pending, _ = ls.l.ep.Recv(ls.c.ctx); t.pending == nil {
			t.failed = true
		}
	}
	// A request handed back is answered here, in the call of the poll the
	// lane offered (a nested call, which stays only while it offers the
	// turn again: the handler hands back no poll the lane would offer,
	// every other request of the stream is answered at once, and one
	// that ends it leaves nothing to offer).
	switch {
	case t.pending != nil:
		req := t.pending
		t.pending = nil
		b, pr := ls.call(req)
		return b, pr, true
	case t.failed:
		b := wire.AppendWindowFrame(ls.stream.buf[:0], ls.stream.id, 0, 0)
		return b, ls.l.side.Protocol(len(b)), true
	}
	return nil, 0, false
}

// driveTurn runs, on the handler's goroutine at its wait for credit for
// a message of size bytes, the exchange the lane offers: the held poll's
// reply, the wait for the next request (until ctx, the stream's, ends)
// and, a poll of credit alone, its filing. True: it ran one (credit may
// have come). The reply and the wait are two crossings, as ServeCalls's
// on a spinning endpoint: the wait may end with the stream's context
// (its deadline), the reply may not.
func (ls *laneSession) driveTurn(ctx context.Context, gen uint32, size int64) bool {
	t, c, sl := &ls.stream.turn, ls.c, &ls.stream
	if t.gen.Load() != gen {
		return false
	}
	t.size.Store(size)
	if t.state.Load() != turnOffered || !t.state.CompareAndSwap(turnOffered, turnHandler) {
		return false
	}
	if t.gen.Load() != gen {
		// The lane offers the next stream's turn: its own handler found
		// it taken, so the lane holds that poll itself.
		ls.handBack()
		return false
	}
	if ls.cancelAsked() {
		return ls.handBack() // the lane answers the poll with the reset
	}
	b, pr := ls.streamTail(t.lent, false, false, ls.replyLimit())
	err := ls.l.ep.Reply(c.ctx, pr, b)
	ls.afterReply()
	var req []byte
	if err == nil {
		c.s.turnWaits.Add(1)
		req, err = ls.l.ep.Recv(ctx)
		c.s.turnWaits.Add(-1)
	}
	switch {
	case err != nil && ctx.Err() != nil && c.ctx.Err() == nil:
		t.await = true
		return ls.handBack()
	case err != nil || req == nil:
		t.failed = true
		return ls.handBack()
	case sl.out == nil || ls.cancelAsked() || !creditPoll(req, c.s.opts.limits.MaxMessageSize):
		t.pending = req
		return ls.handBack()
	}
	ls.l.in.Add(float64(len(req)))
	if _, _, err := ls.fileStreamFrames(req); err != nil {
		// Past creditPoll's checks, refused by filing (credit past the
		// window): the lane files it again, is refused, and answers it as
		// a malformed request (the lane ends).
		t.pending = req
		return ls.handBack()
	}
	c.s.turnExchanges.Add(1)
	t.lent, sl.next = sl.next, false
	if !t.lent && sl.last >= leaseMin && sl.out.Len() == 0 && c.st.Len() > 0 {
		t.lent = ls.lendReply(ls.replyLimit())
	}
	if !t.lent || c.st.Len() == 0 {
		return ls.handBack() // the lane holds the poll as its own
	}
	c.s.lentPolls.Add(1)
	t.at.Store(int64(time.Since(epoch)))
	t.state.Store(turnOffered)
	return true
}

// handBack gives the turn back to the lane's goroutine.
func (ls *laneSession) handBack() bool {
	ls.stream.turn.state.Store(turnLane)
	ls.kickTurn()
	return true
}

// kickTurn wakes a lane's goroutine offering its turn: the handler
// handed it back, or its stream is finished (nothing will take it).
func (ls *laneSession) kickTurn() {
	t := &ls.stream.turn
	if t.state.Load() == turnOffered {
		t.state.CompareAndSwap(turnOffered, turnLane)
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// creditPoll reports whether req is credit alone ending in an empty
// credit: a poll the handler can file itself.
func creditPoll(req []byte, max int) bool {
	last := false
	for off := 0; off < len(req); {
		h, err := wire.DecodeHeader(req[off:], max)
		if err != nil || h.Kind != wire.KindStreamWindow {
			return false
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		if end > len(req) {
			return false
		}
		last = end == len(req) && h.PayloadLen() == 8 && emptyCredit(req[off+wire.HeaderSize:end])
		off = end
	}
	return last
}
