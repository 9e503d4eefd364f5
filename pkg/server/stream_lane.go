//go:build cgo && linux

package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A lane carries one stream at a time (docs/design/streams.md, "Streams
// on lanes"): the client's open turns it into the stream's, and each of
// its requests then holds the client's stream frames (open, data, end,
// credit, reset: the TCP frames, one after another), each reply the
// server's. A request of nothing but credit ending in an empty credit is
// a poll: its reply waits until the server has a frame to send, so a
// stream costs no exchange while its handler has nothing to say. Once the stream's end
// or a reset went either way the lane is free for the next stream.
//
// A client or bidirectional stream takes two lanes: its client's
// messages must not wait behind a poll the server holds (the handler may
// wait for them before it sends). The first lane's first request opens
// the stream and names a join token (a join frame); from then on it
// carries only polls, and every frame of the server's. The second lane's
// first request joins the stream by its token, and its requests carry
// the client's frames, filed with the first lane's stream state and
// answered at once with an empty credit frame: nothing the server sends
// goes that way, so the server's frames keep their order.

// laneBatch bounds the frames one reply carries (at least one frame is
// carried, whatever its size), and the memory lent to the outbox: the
// default 1 MiB window's messages with their frames' headers and the one
// message beyond it a sender may have in flight (the overshoot rule), for
// messages up to 256 KiB. At 1 MiB the lease held 15 frames of a 64 KiB
// stream's 16 or 17: the rest were queued, and with frames queued the
// next reply's lease was not lent (frames keep their order), so a third of
// the replies were copied out of the outbox.
const laneBatch = 1<<20 + 256<<10

// laneStream is the stream a lane carries.
type laneStream struct {
	out *streamcore.Outbox // the handler's frames, for the replies; nil: no stream
	id  int32
	buf []byte // the reply: valid until the next request
	// last is the size of the last reply of frames: a poll lends the
	// outbox the reply's memory only after one of leaseMin or more (a
	// stream of small messages keeps copying them, cheaper than the
	// lease's cgo crossing, and its lane's buffer small)
	last int
	// next: the outbox holds, across the exchange sending the last reply,
	// the engine's other staging buffer for the next reply (lendNext)
	next bool
	// lease: the memory last lent to the outbox (valid while lent)
	lease []byte
	join  *laneJoin // a client or bidirectional stream's way in for its second lane
	turn  laneTurn  // the exchanges' driver (stream_laneturn.go)
	// ended: the reply in hand ends the stream (its end or a reset)
}

// laneJoin is what a client or bidirectional stream's second lane files
// the client's frames with: the first lane's stream state and outbox.
type laneJoin struct {
	c     *conn // the first lane's
	st    *streamcore.Conn
	out   *streamcore.Outbox
	id    int32
	token [wire.JoinTokenSize]byte

	mu   sync.Mutex // held while a frame is filed, and to set done and ep
	done bool       // the first lane left the stream: frames are dropped
	// ep: the second lane's endpoint, its waits blocked while the stream
	// lasts (blockWaits); the first lane, leaving, unblocks them.
	ep *rdma.RPCEndpoint
}

// streamCall runs one request of a lane carrying a stream; it returns
// the reply and the protocol to send it by.
func (ls *laneSession) streamCall(req []byte) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	l.in.Add(float64(len(req)))
	sl := &ls.stream
	if sl.out == nil {
		sl.out, sl.last = streamcore.NewOutbox(), 0
		opts := []streamcore.ConnOption(nil)
		if l.ep != nil && !l.viaFLOCK {
			opts = append(opts, streamcore.WithDriver(ls.newDriver()))
		}
		st := streamcore.NewConn(sl.out.Write, c.releaseStreamMsg, l.peerWin, streamcore.WithDefaults(c.s.opts.streams.windows), opts...)
		c.mu.Lock()
		c.st, c.sw = st, sl.out
		ls.streams++ // the client numbers its opens on the lane alike (Cancel)
		c.mu.Unlock()
	}
	// Within what the lane's engines carry (the plan's, from the message
	// limit): a reply of several frames past it would be refused and end
	// the lane (one frame alone is held to it when it is written).
	limit := ls.replyLimit()
	poll, reset, err := ls.fileStreamFrames(req)
	if err != nil {
		// As a malformed frame closes a connection, it ends the lane: its
		// stream is reset, and the lane stops once this reply is out.
		c.s.log.Info("hatrpc: bad stream frame on a lane", "remote", c.remote, "function", l.fn, "err", err)
		c.endStreams(err)
		sl.buf = wire.AppendResetFrame(sl.buf[:0], sl.id, proto.ExcProtocolError, err.Error())
		ls.leaveStream()
		ls.stop()
		return ls.streamReply(sl.buf)
	}
	// A poll waits for a frame to send while the stream is open; the
	// lane's end (the client gone, the server closing) ends the wait.
	// Meanwhile the outbox holds the reply's registered memory, so the
	// handler's next frames are written straight into it (Outbox.Lend).
	lent := sl.next
	sl.next = false
	if !lent && poll && sl.last >= leaseMin && sl.out.Len() == 0 && c.st.Len() > 0 {
		lent = ls.lendReply(limit)
	}
	if lent && poll {
		c.s.lentPolls.Add(1)
		if ls.offersTurn() {
			if b, pr, done := ls.offerTurn(&lent); done {
				return b, pr
			}
		}
	}
	// A poll the client canceled the stream under (a Cancel on the link,
	// which may come before the poll or while it is held) is answered at
	// once, ending the stream: the client then takes the lane back.
	canceled := poll && ls.cancelAsked()
	for poll && !canceled && sl.out.Len() == 0 && c.st.Len() > 0 {
		select {
		case <-sl.out.Wake():
		case <-ls.cancels:
			canceled = ls.cancelAsked()
		case <-c.ctx.Done():
			poll = false
		}
	}
	return ls.streamTail(lent, reset, canceled, limit)
}

// streamTail answers a request whose frames are filed: the outbox's
// frames, or an empty credit, or the reset.
func (ls *laneSession) streamTail(lent, reset, canceled bool, limit int) ([]byte, rdma.Protocol) {
	c, sl := ls.c, &ls.stream
	if canceled {
		ls.cancelStream()
		reset = true
	}
	// Whether the stream is still open is read before the take: a handler
	// writes its end (or a reset its frame) before the stream is finished,
	// so a stream over by now has every frame queued for this take. Read
	// after, a handler ending in between would be taken for over with
	// its end still queued, and the end dropped with the outbox (a
	// server stream ending at once on an empty range: hatkv's streamed
	// scan failed with the client's next poll answered as a call).
	live := c.st.Len() > 0
	var b []byte
	if lent {
		// The next reply's lease goes to the outbox as this one's frames
		// come back, in one step: the handler, woken by the credit this
		// request brought, writes on meanwhile.
		next := ls.nextLease(sl.lease, limit)
		if b, sl.next = sl.out.ReclaimLend(next); len(b) > 0 {
			c.s.lentReplies.Add(1)
		}
		if sl.next {
			sl.lease = next
			c.s.nextLeases.Add(1)
		}
	}
	if len(b) == 0 {
		b, sl.next = sl.out.TakeLeaseLend(limit, ls.replyLease, func(dst []byte) []byte {
			if len(dst) < leaseMin {
				return nil
			}
			sl.lease = ls.nextLease(dst, limit)
			return sl.lease
		})
		if sl.next {
			c.s.nextLeases.Add(1)
		}
	}
	ended := reset || endsStream(b)
	if !sl.next && !ended && len(b) >= leaseMin {
		ls.lendNext(b, limit)
	}
	sl.last = len(b)
	if canceled && !endsStream(b) {
		// The client learns the stream is over (the lane in step) from
		// the reset; what the handler queued before is of no use to it.
		b = nil
	}
	if len(b) == 0 {
		b = wire.AppendWindowFrame(sl.buf[:0], sl.id, 0, 0) // an answer with nothing to say
		ended = ended || !live
		if ended && (canceled || !reset && sl.join != nil) {
			// The client's reset came by the second lane, or its cancel by
			// the link: this lane's client learns the stream is over from
			// a reset of its own.
			b = wire.AppendResetFrame(sl.buf[:0], sl.id, proto.ExcUnknown, "stream: reset by the client")
		}
		sl.buf = b
	}
	if ended {
		ls.leaveStream()
	}
	return ls.streamReply(b)
}

func (ls *laneSession) replyLimit() int {
	limit := min(laneBatch, fastpath.MaxMessage)
	if m := ls.l.side.Config.MaxMessage; m > 0 {
		limit = min(limit, m)
	}
	return limit
}

// cancelAsked reports whether the client canceled the stream the lane
// carries by its link (fastpath.Cancel naming its number): a Cancel for
// an earlier stream, late on the link, is none of this one's.
func (ls *laneSession) cancelAsked() bool {
	return ls.canceled.Load() == ls.streams
}

// noteCancel records a Cancel the lane's link read (on its watcher's
// goroutine), resets the stream it names if the lane still carries it,
// and wakes a poll held meanwhile. The reset is at once, held poll or
// not: a client holding a borrowed message read in the lane's reply
// sends the cancel with no exchange in flight, and cannot send the lane's
// next request (its reset) before the message is given back, so the
// handler would run on meanwhile (stream_lanecancel.go, pkg/client).
func (ls *laneSession) noteCancel(stream uint32) {
	ls.canceled.Store(stream)
	c := ls.c
	c.mu.Lock()
	st := c.st
	if ls.streams != stream {
		st = nil // over already: the lane carries another stream, or none
	}
	c.mu.Unlock()
	if st != nil {
		st.Each(func(s *streamcore.Stream) {
			clientReset(s, proto.ExcUnknown, "canceled: the client canceled the stream")
		})
	}
	select {
	case ls.cancels <- struct{}{}:
	default:
	}
}

// cancelStream resets the lane's stream as the client's reset frame
// would (its handler's context canceled, the same metrics): the client
// canceled it while the server held its poll, so that frame could not
// come on the lane.
func (ls *laneSession) cancelStream() {
	f := wire.AppendResetFrame(nil, ls.stream.id, proto.ExcUnknown, "canceled: the client canceled the stream")
	h, _ := wire.DecodeHeader(f, len(f))
	_ = fileLaneFrame(ls.c, ls.c.st, ls.c.sw, &h, f)
}

// replyLease is where a reply of n bytes of frames is taken to: the
// engine's registered buffer from leaseMin (the engine then sends it
// without staging a copy: one copy of each message fewer), else the
// session's own buffer (a lease costs a cgo crossing, more than copying
// a small reply). The lease is never kept past the reply: the engine may
// move its buffer.
func (ls *laneSession) replyLease(n int) []byte {
	if ep := ls.l.ep; n >= leaseMin && ep != nil && !ls.l.viaFLOCK {
		if lease := ep.ReplyBuffer(n); len(lease) >= n {
			return lease[:n]
		}
	}
	sl := &ls.stream
	if cap(sl.buf) < n {
		sl.buf = make([]byte, 0, n)
	}
	if n <= laneBufKeep {
		return sl.buf[:n]
	}
	b := sl.buf[:n]
	sl.buf = nil // not a huge one forever
	return b
}

// lendNext lends the stream's outbox, for the next reply, the engine's
// staging buffer this reply b does not go from (rdma.NextReplyBuffer):
// the handler's frames written while b goes out and the client takes it
// in are written straight into registered memory, which the next reply
// then goes from without a copy, and the fill of one reply overlaps the
// send of the one before (two buffers: the lane's one reply buffer kept
// them in turn, and a frame written meanwhile was copied into the outbox
// and again into the next reply). Only after a reply of leaseMin or more
// (a bulk stream: a stream of small messages keeps copying them and its
// lane one small buffer). The lease stays lent past this exchange, to the
// next request's streamCall, or to leaveStream or the lane's end
// (reclaimNext), whichever comes first: never past the endpoint.
func (ls *laneSession) lendNext(b []byte, limit int) {
	if next := ls.nextLease(b, limit); next != nil && ls.stream.out.Lend(next) {
		ls.stream.next, ls.stream.lease = true, next
		ls.c.s.nextLeases.Add(1)
	}
}

// nextLease is the engine's staging buffer reply does not go from, limit
// bytes or fewer, at least leaseMin (nil: none).
func (ls *laneSession) nextLease(reply []byte, limit int) []byte {
	ep := ls.l.ep
	if ep == nil || ls.l.viaFLOCK {
		return nil
	}
	if next := ep.NextReplyBuffer(reply, limit); len(next) >= leaseMin {
		return next
	}
	return nil
}

// reclaimNext takes back the lease lendNext left with the outbox, before
// the lane's endpoint (whose memory it is) closes: a handler still
// writing then writes into the outbox's own buffer.
func (ls *laneSession) reclaimNext() {
	if sl := &ls.stream; sl.next && sl.out != nil {
		sl.out.Reclaim()
		sl.next, sl.lease = false, nil
	}
}

// lendReply lends the stream's outbox the engine's registered buffer for
// the pending request's reply, limit bytes, while a poll waits for the
// handler's frames: written into it, they need no copy from the outbox
// into the lease (the four copies of a lane stream's message become
// three). Not through FLOCK, which sends replies from its own ring. A
// stream of 64 KiB messages wrote 96 % of its bytes this way (the lane
// goroutine, not the handler, is the slower side, so the handler is
// mostly waiting on credit when a poll comes).
func (ls *laneSession) lendReply(limit int) bool {
	ep := ls.l.ep
	if ep == nil || ls.l.viaFLOCK {
		return false
	}
	lease := ep.ReplyBuffer(limit)
	if len(lease) < limit || !ls.stream.out.Lend(lease[:limit]) {
		return false
	}
	ls.stream.lease = lease[:limit]
	return true
}

func (ls *laneSession) streamReply(b []byte) ([]byte, rdma.Protocol) {
	ls.l.out.Add(float64(len(b)))
	return b, ls.l.side.Protocol(len(b))
}

// leaveStream frees the lane of its stream: the client will send no more
// frames for it, and frames its handler still writes (none but after a
// reset, which fails them anyway) have nowhere to go.
func (ls *laneSession) leaveStream() {
	c := ls.c
	ls.dropJoin()
	ls.stream.out.Close()
	ls.stream.out, ls.stream.next, ls.stream.lease = nil, false, nil
	c.mu.Lock()
	c.st, c.sw = nil, nil
	c.mu.Unlock()
}

// fileStreamFrames files the frames of a request with the lane's stream
// as the connection's reader files a TCP connection's: poll reports a
// request of nothing but credit whose last frame is an empty credit,
// reset one that resets the stream.
// An error is a malformed request.
func (ls *laneSession) fileStreamFrames(req []byte) (poll, reset bool, err error) {
	c := ls.c
	poll = true
	for off := 0; off < len(req); {
		h, err := wire.DecodeHeader(req[off:], c.s.opts.limits.MaxMessageSize)
		if err != nil {
			return false, false, err
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		switch {
		case end > len(req):
			return false, false, fmt.Errorf("%w: lane stream frame of %d bytes in %d", wire.ErrBadFrame, end-off, len(req)-off)
		case h.Kind < wire.KindStreamOpen || h.Kind > wire.KindStreamJoin:
			return false, false, fmt.Errorf("%w: frame kind %d on a lane carrying a stream", wire.ErrBadFrame, h.Kind)
		case h.Kind == wire.KindStreamOpen:
			ls.stream.id = h.Seqid
		case h.Kind == wire.KindStreamJoin:
			if err := ls.offerJoin(&h, req[off+wire.HeaderSize:end]); err != nil {
				return false, false, err
			}
			poll = false
			off = end
			continue
		}
		// Credit alone asks for nothing back, but an empty credit last
		// asks to be held till there is (the client's poll, alone or
		// after its credit: one exchange, not one for the credit's empty
		// answer and another to poll).
		if h.Kind != wire.KindStreamWindow {
			poll = false
		} else if end == len(req) && (h.PayloadLen() != 8 || !emptyCredit(req[off+wire.HeaderSize:end])) {
			poll = false
		}
		reset = reset || h.Kind == wire.KindStreamReset
		if err := fileLaneFrame(c, c.st, c.sw, &h, req[off:end]); err != nil {
			return false, false, err
		}
		off = end
	}
	return poll, reset, nil
}

// fileLaneFrame files one frame of a lane's request (frame, a lease on
// the engine's memory) with sc, whose frames go to sw, admitting it
// first (laneCharge).
func fileLaneFrame(c *conn, sc *streamcore.Conn, sw streamWriter, h *wire.Header, frame []byte) error {
	charge, err := laneCharge(c, h, frame)
	if err != nil {
		refuseLaneFrame(c, sc, sw, h, err)
		return nil
	}
	return fileLaneCharged(c, sc, sw, h, frame, charge)
}

// laneCharge admits a data frame of wire.ChargeMin bytes or more read
// from a lane against c's share of the request memory budget, as a TCP
// connection's reader admits it (smaller ones are bounded by the
// windows); it returns the charge, which the message holds until the
// handler consumes it.
func laneCharge(c *conn, h *wire.Header, frame []byte) (int64, error) {
	if h.Kind != wire.KindStreamData || len(frame) < wire.ChargeMin {
		return 0, nil
	}
	if err := c.s.budget.acquire(c, int64(len(frame)), c.s.opts.busyTimeout); err != nil {
		return 0, err
	}
	return int64(len(frame)), nil
}

// refuseLaneFrame resets the stream of a data frame the budget refused;
// its connection credit goes back at once.
func refuseLaneFrame(c *conn, sc *streamcore.Conn, sw streamWriter, h *wire.Header, err error) {
	if err == errBudgetWait {
		c.s.met.rejected.WithLabelValues("memory_budget").Inc()
	}
	sc.Discarded(int64(h.PayloadLen()))
	c.resetStream(sw, h.Seqid, sc.Get(h.Seqid), proto.ExcInternalError, err)
}

// fileLaneCharged files a frame admitted with charge: what the stream
// keeps (its queued messages) is copied out of the lease, as a reader's
// frames are its own.
func fileLaneCharged(c *conn, sc *streamcore.Conn, sw streamWriter, h *wire.Header, frame []byte, charge int64) error {
	// Sized for the frame: a large message is not grown into from a small
	// pooled buffer (fresh memory, faulted in, every message).
	bp := wire.GetBufSize(len(frame))
	*bp = append((*bp)[:0], frame...)
	return c.fileStream(sc, sw, h, bp, charge)
}

func emptyCredit(payload []byte) bool {
	msgs, n, err := wire.ParseWindow(payload)
	return err == nil && msgs == 0 && n == 0
}

// endsStream reports whether the server's frames b hold the stream's end
// or a reset.
func endsStream(b []byte) bool {
	for off := 0; off+wire.HeaderSize <= len(b); {
		h, err := wire.DecodeHeader(b[off:], len(b))
		if err != nil {
			return false
		}
		if h.Kind == wire.KindStreamEnd || h.Kind == wire.KindStreamReset {
			return true
		}
		off += wire.HeaderSize + h.PayloadLen()
	}
	return false
}

// offerJoin files the join token of the stream this lane opens (a
// client or bidirectional one): its second lane joins by it.
func (ls *laneSession) offerJoin(h *wire.Header, payload []byte) error {
	sl := &ls.stream
	if err := wire.CheckStreamHeader(h); err != nil {
		return err
	}
	if sl.join != nil || sl.out == nil || sl.id != h.Seqid {
		return fmt.Errorf("%w: join frame for stream %d on a lane carrying stream %d", wire.ErrBadFrame, h.Seqid, sl.id)
	}
	j := &laneJoin{c: ls.c, st: ls.c.st, out: sl.out, id: h.Seqid}
	copy(j.token[:], payload)
	if _, dup := ls.c.s.laneJoins.LoadOrStore(j.token, j); dup {
		return fmt.Errorf("%w: join token in use", wire.ErrBadFrame)
	}
	sl.join = j
	ls.blockWaits(true) // its next request, a poll, waits on the client's runner
	return nil
}

// blockWaits makes the lane park its waits for requests in Go's
// netpoller while it carries a client or bidirectional stream (on), or
// gives it back the tuner's spin (off). The first lane's next request is
// a poll, sent once the client's runner took the last reply in; the
// second lane's is the client's next frame, which may wait on this
// side's handler: each of such a stream's messages is handed between the
// lanes' goroutines and the handler, and on a host of few cores a thread
// spinning in C for it kept the core they needed, one blocked in C its
// thread (docs/design/streams-lanes.md; the client's lanes
// do the same, pkg/client streamBlock). A cgo crossing at most, at a
// change only.
func (ls *laneSession) blockWaits(on bool) {
	if ep := ls.l.ep; ep != nil {
		ep.BlockWaits(on)
	}
}

// dropJoin closes the way in of the stream this lane carries, if it has
// one: its second lane's frames are dropped from now on. It runs when
// the lane leaves the stream, and when the lane ends (a client killed
// mid-stream: its second lane may still file for a moment).
func (ls *laneSession) dropJoin() {
	j := ls.stream.join
	if j == nil {
		return
	}
	ls.stream.join = nil
	ls.blockWaits(false)
	ls.c.s.laneJoins.CompareAndDelete(j.token, j) // never joined
	j.mu.Lock()
	j.done = true
	if j.ep != nil {
		// The stream is over: the second lane waits as any lane again,
		// rather than from its next request.
		j.ep.BlockWaits(false)
	}
	j.mu.Unlock()
}

// joinedCall runs a request of a lane that joined (or, its first frame a
// join, joins) a client or bidirectional stream another lane carries:
// the client's frames are filed with that stream and answered at once.
func (ls *laneSession) joinedCall(req []byte) ([]byte, rdma.Protocol) {
	c, l := ls.c, ls.l
	l.in.Add(float64(len(req)))
	if err := ls.fileJoined(req); err != nil {
		c.s.log.Info("hatrpc: bad stream frame on a lane", "remote", c.remote, "function", l.fn, "err", err)
		id := int32(1)
		if j := ls.joined; j != nil {
			id = j.id
		}
		ls.unjoin(err)
		ls.stream.buf = wire.AppendResetFrame(ls.stream.buf[:0], id, proto.ExcProtocolError, err.Error())
		ls.stop()
		return ls.streamReply(ls.stream.buf)
	}
	ls.stream.buf = wire.AppendWindowFrame(ls.stream.buf[:0], ls.joined.id, 0, 0)
	return ls.streamReply(ls.stream.buf)
}

// fileJoined files the frames of a joined lane's request.
func (ls *laneSession) fileJoined(req []byte) error {
	c := ls.c
	for off := 0; off < len(req); {
		h, err := wire.DecodeHeader(req[off:], c.s.opts.limits.MaxMessageSize)
		if err != nil {
			return err
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		switch {
		case end > len(req):
			return fmt.Errorf("%w: lane stream frame of %d bytes in %d", wire.ErrBadFrame, end-off, len(req)-off)
		case h.Kind == wire.KindStreamJoin && off == 0:
			if err := wire.CheckStreamHeader(&h); err != nil {
				return err
			}
			ls.unjoin(nil)
			if v, ok := c.s.laneJoins.LoadAndDelete([wire.JoinTokenSize]byte(req[off+wire.HeaderSize : end])); ok {
				j := v.(*laneJoin)
				ls.joined = j
				j.mu.Lock()
				if !j.done && ls.l.ep != nil {
					j.ep = ls.l.ep
					ls.blockWaits(true)
				}
				j.mu.Unlock()
			} else {
				// The stream ended before its second lane came (its
				// handler returned at once, say): what the lane carries
				// for it is dropped, as data after a TCP stream's end.
				ls.joined = &laneJoin{id: h.Seqid, done: true}
			}
		case ls.joined == nil || h.Kind < wire.KindStreamData || h.Kind > wire.KindStreamReset:
			return fmt.Errorf("%w: frame kind %d on a lane joined to a stream", wire.ErrBadFrame, h.Kind)
		default:
			if err := ls.joined.file(&h, req[off:end]); err != nil {
				return err
			}
		}
		off = end
	}
	if ls.joined == nil {
		return fmt.Errorf("%w: empty request on a lane joined to no stream", wire.ErrBadFrame)
	}
	return nil
}

// file files one frame of the client's with the joined stream, unless
// its first lane left it (the stream ended: the frame is a stray, as
// data after a TCP stream's end).
func (j *laneJoin) file(h *wire.Header, frame []byte) error {
	j.mu.Lock()
	done := j.done
	j.mu.Unlock()
	if done {
		return nil
	}
	// Admitted before the lock: a wait for memory must not hold up the
	// first lane leaving the stream.
	charge, cerr := laneCharge(j.c, h, frame)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done {
		j.c.s.budget.release(j.c, charge)
		return nil
	}
	var err error
	if cerr != nil {
		refuseLaneFrame(j.c, j.st, j.out, h, cerr)
	} else {
		err = fileLaneCharged(j.c, j.st, j.out, h, frame, charge)
	}
	if j.st.Get(j.id) == nil {
		// Over with maybe nothing for the first lane to send (the
		// client's reset): its held poll must look.
		j.out.Kick()
	}
	return err
}

// unjoin takes a lane off the stream it joined: the stream ended, or the
// lane moves on to another stream or call (nil err), or it failed: then
// the stream is reset (the client's frames can no longer come).
func (ls *laneSession) unjoin(err error) {
	j := ls.joined
	if j == nil {
		return
	}
	ls.joined = nil
	ls.blockWaits(false)
	if err == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.done {
		if st := j.st.Get(j.id); st != nil {
			cause := err
			if !errors.Is(err, streamcore.ErrLaneGone) {
				cause = fmt.Errorf("%w: %w", streamcore.ErrLaneGone, err)
			}
			j.c.resetStream(j.out, j.id, st, proto.ExcInternalError, cause)
		}
	}
}
