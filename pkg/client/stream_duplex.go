//go:build cgo && linux

package client

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A client or bidirectional stream on lanes takes two lanes of its
// function's pool (docs/design/streams-lanes.md). A lane is
// one exchange at a time started by the client, and the server holds a
// poll until it has a frame to send; on one lane a client message queued
// behind a held poll would wait for a server frame that may wait for that
// message (a bidirectional handler answering each message, a client
// stream's handler reading to the end before it replies). So:
//
//   - the first lane (laneRunner.runDuplex) carries the open and the join
//     token in its first request, and then only polls: every frame of the
//     server's comes back on it, in the order the server wrote them;
//   - the second lane (upRunner) joins the stream by the token and carries
//     everything this side queues (messages, end, credit, a reset); the
//     server files it with the stream and answers at once, with an empty
//     credit frame.
//
// Neither waits on the other: a request on the second lane is never held,
// and a poll on the first never keeps this side's frames back. The stream
// ends when the server's end or a reset comes on the first lane; the
// second lane's runner then finishes the exchange in hand (answered at
// once) and both lanes go back to the pool before RecvMsg sees the end.

// upRunner drives the second lane of a client or bidirectional stream.
type upRunner struct {
	r     *laneRunner
	l     *clane
	token [wire.JoinTokenSize]byte
	// done is closed by the first lane's runner once the stream is over
	// on its side (its lane back or closed); exited once this runner put
	// its lane back.
	done, exited chan struct{}
	failed       atomic.Bool // the stream failed: the lane may be out of step, it is closed
	// The runner's own (take): lease, the engine's staging buffer the
	// outbox is lent while lent; bulk, the last batch was leaseMin or more.
	lease      []byte
	lent, bulk bool
}

// runDuplex drives the first lane of a client or bidirectional stream.
func (r *laneRunner) runDuplex() {
	cs, l := r.cs, r.l
	started := false
	var req []byte
	for {
		if err := cs.ctx.Err(); err != nil {
			// Both lanes go back once the server acknowledged
			// (stream_lanecancel.go).
			r.drainDuplex(context.Cause(cs.ctx), started)
			return
		}
		if started {
			if !r.startPoll() {
				continue // canceled
			}
			req = wire.AppendWindowFrame(req[:0], cs.id, 0, 0) // a poll
		} else {
			req = r.out.Take(req[:0], laneStreamBatch) // the open, the join token, what followed
			r.opened()
		}
		resp, err := r.exchange(r.xctx, l, req)
		if started {
			r.stopPoll()
		}
		if err != nil && cs.ctx.Err() != nil {
			// Canceled, and the poll not answered within the bound (or the
			// lane failed): this lane goes, the second is in step unless
			// its own exchange was cut short.
			r.end(callFailed(cs.ctx, "lane", err))
			r.closeDuplex(false, started)
			return
		}
		if err != nil {
			r.failDuplex(callFailed(cs.ctx, "lane", err), started)
			return
		}
		last, err := r.file(resp, false)
		if err != nil {
			r.failDuplex(&ConnError{Op: "lane", Err: err}, started)
			return
		}
		if last != nil {
			// Over both ways, both lanes in step: both go back before
			// RecvMsg can see the end (so a caller that opens its next
			// stream then finds them idle).
			r.out.Close()
			r.stopUp(started)
			canceled, kept := r.finish(), !l.broken.Load()
			r.p.put(l)
			r.released(canceled, kept) // the server's answer to a Cancel, or an end that crossed it
			if err := fileStreamFrame(r.sc, &last.h, last.bp); err != nil {
				r.end(&ConnError{Op: "lane", Err: err})
			}
			return
		}
		if !started {
			// The server has the stream and its token: the second lane
			// may join it.
			started = true
			go r.up.run()
		}
	}
}

// stopUp ends the second lane's runner and waits until it put its lane
// back (one never started: its lane goes back untouched).
func (r *laneRunner) stopUp(started bool) {
	u := r.up
	if !started {
		if u.failed.Load() {
			u.l.broken.Store(true)
		}
		r.p.put(u.l)
		return
	}
	close(u.done)
	<-u.exited
}

// failDuplex ends the stream with err and closes both lanes: either may
// be out of step with its server, which, seeing them go, ends its side.
func (r *laneRunner) failDuplex(err error, started bool) {
	defer r.released(r.cs.ctx.Err() != nil, false) // canceled, and the handshake cut short
	r.up.failed.Store(true)
	r.end(err)
	r.cs.cancel(err)
	r.xcancel() // the second lane's exchange in hand ends too
	r.stopUp(started)
	r.finish()
	r.l.broken.Store(true)
	r.p.put(r.l)
}

// run sends what the stream queues on the second lane, the join frame
// first.
func (u *upRunner) run() {
	defer close(u.exited)
	r, cs, l := u.r, u.r.cs, u.l
	// own is the runner's buffer (the join frame first); a request of
	// leaseMin or more is taken into the lane's staging buffer instead,
	// and the outbox is lent the engine's other staging buffer meanwhile
	// (take).
	own := wire.AppendJoinFrame(nil, cs.id, u.token[:])
	var req []byte
	joined := false // a request went: the join frame with it
	reset := false  // the cancel's reset went (a server without the link's Cancel)
	for {
		select {
		case <-u.done:
			r.out.Reclaim() // before the lane, whose memory it is, may close
			if u.failed.Load() {
				l.broken.Store(true)
			}
			r.p.put(l)
			return
		default:
		}
		if cs.ctx.Err() != nil {
			// The cancel starts here if the stream's watcher has not run
			// yet (its goroutine not scheduled): the reset below may end
			// the first lane's held poll before it does, and the stream
			// must count as canceled by then (a no-op once it ran).
			r.onCancel()
			if r.l.linkCancel || reset || r.hang {
				// Canceled: the first lane's runner tells the server, and
				// closes done once it answered.
				<-u.done
				continue
			}
			// A server without the link's Cancel learns of it from a
			// reset here, answered at once; filed with the stream, it
			// answers the first lane's held poll with a reset (the
			// handshake: stream_lanecancel.go).
			reset = true
			own = own[:0]
			if !joined {
				// Canceled before the lane's first request: the join
				// first, or the server takes the reset for a call.
				own = wire.AppendJoinFrame(own, cs.id, u.token[:])
			}
			own = append(own, cancelReset(cs.id, context.Cause(cs.ctx))...)
			req = own
		} else if !u.take(&own, &req) {
			continue
		}
		// The plan's batch row (hints.Table.StreamBatch): past the
		// server's pre-known buffer a read rendezvous. Counted by the
		// endpoint (requests).
		pr := r.p.side.StreamProtocol(len(req))
		// Under the runner's context, not the stream's: ended midway, an
		// exchange breaks the lane (stream_lanecancel.go).
		resp, err := l.ep.Call(r.xctx, pr, req)
		if err == nil {
			err = upReply(resp, r.cs.s.c.o.limits.MaxMessageSize)
		} else {
			err = callFailed(cs.ctx, "lane", err)
		}
		if err != nil {
			// The first lane's runner, its poll answered by the cancel
			// (or ended by the bound), closes done.
			u.failed.Store(true)
			r.end(err)
			cs.cancel(err)
			r.out.Reclaim()
			<-u.done
			l.broken.Store(true)
			r.p.put(l)
			return
		}
		r.p.growReq(len(req))
		own, joined = own[:0], true
		u.bulk = len(req) >= leaseMin
	}
}

// take takes what the stream queued into req (in own, the runner's
// buffer, in the lane's staging buffer, or where SendMsg wrote it: the
// lease lent to the outbox); false: nothing to send now (it waited, or
// the stream was canceled meanwhile): run looks again.
func (u *upRunner) take(own, req *[]byte) bool {
	r, cs, l := u.r, u.r.cs, u.l
	*req = nil
	if u.lent {
		// What SendMsg wrote into the lease meanwhile goes from there
		// (the engine swaps the buffers), and the buffer the last
		// request went from is lent for the next in the same step.
		next := u.nextLease(u.lease)
		var b []byte
		if b, u.lent = r.out.ReclaimLend(next); u.lent {
			u.lease = next
		}
		if *req = b; len(b) > 0 {
			r.p.ls.streamRoutes.leased.Add(1)
		}
	}
	switch {
	case len(*req) > 0:
	case len(*own) == 0 && r.out.Len() >= leaseMin:
		// Straight into the registered buffer the engine sends from
		// (RequestBuffer), not staged again: one copy of each message
		// fewer. Smaller batches are copied, which costs less than the
		// lease's crossing.
		*req, u.lent = r.out.TakeLeaseLend(laneStreamBatch, l.ep.RequestBuffer, func(dst []byte) []byte {
			u.lease = u.nextLease(dst)
			return u.lease
		})
	default:
		*own = r.out.Take(*own, laneStreamBatch)
		*req = *own
	}
	if cs.ctx.Err() != nil {
		// Canceled while it took them (its reset among them, maybe):
		// the cancel's way instead (run).
		*own = (*own)[:0]
		return false
	}
	if len(*req) == 0 {
		if !u.lent && u.bulk {
			// Waiting after a bulk batch: SendMsg's next messages go
			// straight into the staging buffer the next request goes
			// from (lendNext's rule on the server: a stream of small
			// messages keeps copying them).
			if next := u.nextLease(nil); next != nil && r.out.Lend(next) {
				u.lent, u.lease = true, next
			}
		}
		select {
		case <-r.out.Wake():
		case <-u.done:
		case <-cs.ctx.Done():
		}
		return false
	}
	return true
}

// nextLease is the engine's staging buffer req does not go from
// (rdma.NextRequestBuffer), laneStreamBatch bytes or fewer, at least
// leaseMin (nil: none): lent to the outbox, SendMsg encodes the next
// batch's messages there while req goes out, and the next request goes
// from it without a copy. It stays lent until the runner takes it back
// (Reclaim, ReclaimLend) or the outbox closes, always before the lane goes
// back to the pool (or is closed), whose endpoint's memory it is.
func (u *upRunner) nextLease(req []byte) []byte {
	if next := u.l.ep.NextRequestBuffer(req, laneStreamBatch); len(next) >= leaseMin {
		return next
	}
	return nil
}

// upReply checks the server's answer on a second lane: an empty credit
// frame, or a reset when the request broke the rules (the lane then
// ends).
func upReply(resp []byte, lim int) error {
	h, err := wire.DecodeHeader(resp, lim)
	if err != nil {
		return &ConnError{Op: "lane", Err: err}
	}
	payload := resp[min(wire.HeaderSize, len(resp)):]
	switch {
	case wire.HeaderSize+h.PayloadLen() != len(resp):
	case h.Kind == wire.KindStreamWindow:
		return nil
	case h.Kind == wire.KindStreamReset:
		typ, text, perr := wire.ParseReset(payload)
		if perr == nil {
			return streamcore.ResetError(typ, text)
		}
	}
	return &ConnError{Op: "lane", Err: fmt.Errorf("%w: answer of kind %d, %d bytes, on a stream's second lane", wire.ErrBadFrame, h.Kind, len(resp))}
}
