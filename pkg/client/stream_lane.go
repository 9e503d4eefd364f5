//go:build cgo && linux

package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/streamcore"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A stream the plan puts on lanes (hints.LanesCarry: where the session
// granted shm or rdma) holds lanes of its function's pool for its life
// (docs/design/streams-lanes.md): a server stream one, a
// client or bidirectional stream two (stream_duplex.go). A server
// stream's lane carries the TCP stream frames: a goroutine of the
// stream's (laneRunner) sends what the stream queued (open, its message,
// end, credit, reset) as one request, or, with nothing queued while the
// server may send, an empty credit frame the server holds until it has
// frames, and files the reply's frames with the stream exactly as the
// session's reader files a connection's.

// laneStreamBatch bounds the frames one request carries (at least one).
const laneStreamBatch = 1 << 20

// laneWindows are the receive windows this Conn grants a stream on a
// lane (sent in the lane's hello, and what its streams count by): as on
// TCP, a message window derived from the byte window when the caller set
// none (streamcore.WithDefaults). A lane exchange costs far more than a
// message, so the message window must not bound what one carries (16
// messages of 64 B were ~1 KiB an exchange).
func (c *Conn) laneWindows() wire.StreamWindows {
	return streamcore.WithDefaults(c.o.streams.windows)
}

// streamRoutes counts the streams the plan gave a lane: on one, and over
// TCP because every lane of the function was busy.
// lent counts the messages of streams on lanes read in place in a
// lane's reply (laneRunner.loan).
// leased counts the second lanes' requests that went from the staging
// memory SendMsg encoded their messages into (upRunner.nextLease).
// kept and closed count the canceled streams on lanes whose (first) lane
// went back to the pool after the server's acknowledgement, and those
// whose lane was closed (stream_lanecancel.go).
// driven counts the exchanges of server streams' lanes their callers
// ran (stream_lanedrive.go).
type streamRoutes struct{ lane, tcp, lent, leased, kept, closed, driven atomic.Uint64 }

// laneStream opens m's stream on a lane when the plan has one for it;
// nil and nil: it goes on the session's TCP connection.
func (c *Conn) laneStream(ctx context.Context, s *session, m *Method, final proto.Struct, timeout time.Duration) (Stream, error) {
	if !hints.LanesCarry(m.Stream) {
		return nil, nil
	}
	want := hints.TransportAuto
	if m.Hints != nil {
		want = m.Hints.Client.Transport
	}
	tr := fastpath.PickTransport(want, s.caps)
	if !transport.Lanes(tr) {
		return nil, nil
	}
	set, respSize := c.laneSet(m.Hints)
	if t := c.tableFor(set, respSize, tr, m.Stream); !t.FastPath() {
		return nil, nil
	}
	p, _, err := c.lanes.pool(m, tr)
	switch {
	case err == errNoLane:
		return nil, nil
	case err != nil:
		return nil, err
	}
	l, err := p.streamLane(ctx)
	if l == nil {
		return nil, c.lanesBusy(err)
	}
	// A client or bidirectional stream takes a second lane for its
	// client's frames (stream_duplex.go): with one lane, a message could
	// wait behind a poll the server holds for a frame that waits on it.
	var up *clane
	var token [wire.JoinTokenSize]byte
	if m.Stream.ClientSends() {
		if up, err = p.streamLane(ctx); up == nil {
			p.put(l)
			return nil, c.lanesBusy(err)
		}
		if _, err := rand.Read(token[:]); err != nil {
			p.put(l)
			p.put(up)
			return nil, err
		}
		streamBlock(l)  // its polls wait on the server's handler
		streamBlock(up) // its frames on the server's lane goroutine
	}
	out := streamcore.NewOutbox()
	sctx, cancel := context.WithCancelCause(ctx)
	cs := &clientStream{s: s, m: m, final: final, ctx: sctx, cancel: cancel, proto: s.format.Proto,
		headerCh: make(chan struct{}), timed: timeout > 0, lane: out, laneMax: p.maxBody(), id: 1} // one stream per lane
	// Receive windows: what the lane's hello granted.
	sc := streamcore.NewConn(out.Write, releaseStreamMsg, s.st.Send, c.laneWindows())
	cs.st, _ = sc.Open(cs.id, cs) // a fresh Conn: cannot fail
	if err = c.writeOpen(ctx, cs, timeout, out.Write); err == nil && up != nil {
		// The join token goes with the open, on the first lane.
		err = out.Write(wire.AppendJoinFrame(nil, cs.id, token[:]))
	}
	if err != nil {
		p.put(l)
		if up != nil {
			p.put(up)
		}
		cancel(err)
		return nil, err
	}
	c.lanes.streamRoutes.lane.Add(1)
	r := &laneRunner{p: p, l: l, cs: cs, sc: sc, out: out}
	if cs.borrow && up == nil {
		// Its large messages are read in place in the lane's replies.
		r.loan = streamcore.NewLoan()
		// A caller that drops the stream holding its last message (it
		// canceled it and returned) will never give that message back:
		// the lane then closes once the stream is unreachable.
		runtime.AddCleanup(cs, (*streamcore.Loan).Abandon, r.loan)
		r.kick = make(chan struct{}, 1)
		cs.laneDrv = r
	}
	r.watchCancel(sctx)
	p.track(r)
	cs.laneEnded = r.startDrain
	if up != nil {
		r.up = &upRunner{r: r, l: up, token: token, done: make(chan struct{}), exited: make(chan struct{})}
		go r.runDuplex()
	} else {
		go r.run()
	}
	cs.stop = context.AfterFunc(sctx, func() { cs.end(context.Cause(sctx)) })
	return cs, nil
}

// streamBlock makes a lane of a client or bidirectional stream park its
// waits for replies in Go's netpoller until put gives the lane back
// (rdma.RPCEndpoint.BlockWaits; docs/design/streams.md, "Streams on
// lanes"). Both lanes' replies wait on goroutines: the first lane's
// polls on the server's handler, the second's frames on the server's
// lane goroutine. Each of the stream's messages is handed between
// goroutines (the caller's, the lanes' runners, the server's lane
// goroutines and handler), and on a host of few cores a thread spinning
// in C for such an answer kept the core those goroutines needed, and one
// blocked in C its thread: a 64 B ping-pong took 95-170 µs a round trip
// spinning, 50-55 µs blocking in C, about TCP's 30 µs parked (2 cores,
// client and server in one process). The tuner's SetSpin applies again
// once the lane is back.
func streamBlock(l *clane) {
	l.blocked = true
	l.ep.BlockWaits(true)
}

// errLanesBusy: every lane a stream may take is held.
var errLanesBusy = errors.New("client: every lane of the function is busy")

// lanesBusy is laneStream's answer when it found no lane: nil (the
// stream goes on the session's TCP connection), counted when the lanes
// were busy; or the error that kept a lane from opening.
func (c *Conn) lanesBusy(err error) error {
	if err == errLanesBusy {
		c.lanes.streamRoutes.tcp.Add(1)
		return nil
	}
	return err
}

// streamLane takes a lane of p for a stream: an idle one, or a new one
// while p may open more. When every lane is busy (errLanesBusy) the
// stream goes over TCP rather than wait for one, since the streams
// holding them may wait on this caller; nil and nil: no lane at all.
func (p *lanePool) streamLane(ctx context.Context) (*clane, error) {
	if l := p.tryIdle(); l != nil {
		return l, nil
	}
	p.cancelEnded()
	if l := p.waitDrained(ctx); l != nil {
		return l, nil
	}
	select {
	case p.tokens <- struct{}{}:
		l, err := p.open(ctx, 0)
		if err != nil {
			<-p.tokens
			if err == errNoLane {
				return nil, nil
			}
			return nil, err
		}
		return l, nil
	default:
		return nil, errLanesBusy
	}
}

// laneRunner drives the exchanges of one stream on its lane.
type laneRunner struct {
	p   *lanePool
	l   *clane
	cs  *clientStream
	sc  *streamcore.Conn
	out *streamcore.Outbox
	// What the server holds in flight as it counts it: the data it sent
	// less the credit that reached it (in requests sent).
	// The stream's own count is credited as RecvMsg queues credit, before
	// the credit is sent: a poll sent on it would wait for credit still
	// here.
	msgs, bytes, conn int64
	// spoke: this side's message (a server stream carries one) or its
	// end went out. Before that a poll could be held while the handler
	// waits for that very message, queued behind the poll: the stream
	// stalled (1 run in 75 of TestServerStreamOnLaneClientKilled).
	spoke bool
	// up: the second lane of a client or bidirectional stream, which
	// carries this side's frames (stream_duplex.go); nil: one lane.
	up *upRunner
	// loan: a server stream's borrowed messages (borrow_msgs) of
	// wire.AliasMin or more are filed as slices of the lane's reply, not
	// copied out of it (a 64 KiB stream's runner spent a quarter of its
	// time copying, on the exchanges' critical path); the next exchange
	// waits until the caller gave them all back (nil: every message is
	// copied). Not for a client or bidirectional stream: its caller may
	// hold a message while SendMsg waits for credit that only the next
	// exchange brings.
	loan *streamcore.Loan
	// The caller's turn (stream_lanedrive.go): drive, kick, finished and
	// the caller's request buffer.
	callerDrive
	// The cancel handshake (stream_lanecancel.go).
	laneCancel
	cmu sync.Mutex
}

// serverMaySend reports whether the server may send a data message now
// (the windows' rule, streamcore.Stream.Send): only then is a poll sure
// to be answered without credit from this side.
func (r *laneRunner) serverMaySend() bool {
	msgs, n := r.cs.st.RecvWindow() // the stream's: its stream_window hint, else the lane's
	return r.msgs < int64(msgs) && r.bytes < int64(n) && r.conn < int64(r.sc.Recv.Conn)
}

// sent counts the credit of a request about to go, and reports whether
// it holds nothing but credit (none at all included) and whether it
// resets the stream.
func (r *laneRunner) sent(req []byte) (creditOnly, reset bool) {
	creditOnly = true
	for off := 0; off+wire.HeaderSize <= len(req); {
		h, err := wire.DecodeHeader(req[off:], len(req))
		if err != nil {
			return false, reset
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		reset = reset || h.Kind == wire.KindStreamReset
		creditOnly = creditOnly && h.Kind == wire.KindStreamWindow
		if h.Kind == wire.KindStreamEnd {
			r.spoke = true
		}
		if h.Kind == wire.KindStreamData && end <= len(req) {
			if _, body, err := wire.StreamBody(&h, req[off+wire.HeaderSize:end]); err == nil && len(body) > 0 {
				r.spoke = true
			}
		}
		if h.Kind == wire.KindStreamWindow && end <= len(req) {
			if msgs, n, err := wire.ParseWindow(req[off+wire.HeaderSize : end]); err == nil {
				if h.Seqid == 0 {
					r.conn -= int64(n)
				} else {
					r.msgs -= int64(msgs)
					r.bytes -= int64(n)
				}
			}
		}
		off = end
	}
	return creditOnly, reset
}

func (r *laneRunner) run() {
	cs := r.cs
	var req []byte
	for {
		if r.finished.Load() {
			return // its caller ran the exchange that ended the stream
		}
		if err := cs.ctx.Err(); err != nil {
			// The stream ended on this side: the lane goes back once the
			// server acknowledged.
			r.drain(context.Cause(cs.ctx))
			return
		}
		if r.offer() {
			continue
		}
		if r.loan != nil && r.loan.Out() > 0 {
			// The last reply is still read in place: the next exchange
			// would overwrite it.
			select {
			case <-r.loan.Wake():
			case <-cs.ctx.Done():
			}
			continue
		}
		req = r.out.Take(req[:0], laneStreamBatch)
		if cs.ctx.Err() != nil {
			continue // canceled as it took them: the handshake instead (drain)
		}
		if len(req) == 0 && (!r.spoke || !r.serverMaySend() || cs.peerDone.Load()) {
			// Nothing the server could send before it has our message
			// or our credit.
			select {
			case <-r.out.Wake():
			case <-cs.ctx.Done():
			}
			continue
		}
		if r.step(req) {
			return
		}
	}
}

// step runs one exchange of req, the frames taken from the outbox (none:
// a poll), and files its reply; true: the stream is over on this lane
// (the lane is back in its pool or given up). The runner's goroutine
// runs it, or the caller's (driveHere) while the runner offers it.
func (r *laneRunner) step(req []byte) bool {
	cs, l := r.cs, r.l
	// Counted before the exchange: the server applies the credit
	// before it answers, so its answer may hold data it allowed.
	creditOnly, reset := r.sent(req)
	poll := creditOnly && r.spoke && r.serverMaySend() && !cs.peerDone.Load()
	if poll {
		// A poll (alone, or after the credit): the server holds it
		// until it has frames, rather than answer the credit at once,
		// often with nothing, and take another exchange to poll.
		if !r.startPoll() {
			return false // canceled: the credit is of no use any more
		}
		req = wire.AppendWindowFrame(req, cs.id, 0, 0)
	}
	if r.seq == 0 {
		r.opened()
	}
	// Not under the stream's context: an exchange ended midway
	// breaks the lane (stream_lanecancel.go).
	resp, err := r.exchange(r.xctx, l, req)
	if poll {
		r.stopPoll()
	}
	if err != nil {
		r.fail(callFailed(cs.ctx, "lane", err), true)
		return true
	}
	last, err := r.file(resp, r.loan != nil && !reset)
	if err != nil {
		r.fail(&ConnError{Op: "lane", Err: err}, true)
		return true
	}
	if last != nil || reset {
		// The stream is over both ways and the lane in step: the next
		// stream (or call) may have it, from before RecvMsg can see
		// the end (so a caller that opens its next stream then finds
		// the lane idle).
		r.out.Close()
		canceled, kept := r.finish(), !l.broken.Load()
		r.p.put(l)
		r.released(canceled, kept) // the server's answer to a Cancel, or an end that crossed it
		if last != nil {
			if err := fileStreamFrame(r.sc, &last.h, last.bp); err != nil {
				r.end(&ConnError{Op: "lane", Err: err}) // the lane is back in its pool already
			}
		}
		return true
	}
	return false
}

// lastFrame is the server's end or reset of the stream, filed once the
// lane is back in its pool.
type lastFrame struct {
	h  wire.Header
	bp *[]byte
}

// exchange is one of the stream's lane exchanges, counted by protocol;
// new lanes are sized for the largest seen, as calls'. A request is a
// batch of this side's frames (a client or bidirectional stream's first
// one carries what was queued with the open): it goes by the plan's
// batch row (hints.Table.StreamBatch; a server stream's table has none,
// the lane row then).
func (r *laneRunner) exchange(ctx context.Context, l *clane, req []byte) ([]byte, error) {
	return r.p.streamExchange(ctx, l, req)
}

func (p *lanePool) streamExchange(ctx context.Context, l *clane, req []byte) ([]byte, error) {
	pr := p.side.StreamProtocol(len(req)) // counted by the endpoint (requests)
	resp, err := l.ep.Call(ctx, pr, req)
	if err == nil {
		p.growReq(len(req))
		p.growResp(len(resp))
	}
	return resp, err
}

// file files the server's frames in a reply (a lease on the lane's
// memory: each is copied out) but for the stream's end or reset, which
// it returns unfiled. With lend, large data frames are lent (r.loan)
// instead of copied, unless the reply ends the stream: the lane then goes
// back to its pool at once, for another stream or call to overwrite.
func (r *laneRunner) file(resp []byte, lend bool) (*lastFrame, error) {
	lim := r.cs.s.c.o.limits.MaxMessageSize
	lend = lend && !endsStream(resp, r.cs.id)
	var last *lastFrame
	for off := 0; off < len(resp); {
		h, err := wire.DecodeHeader(resp[off:], lim)
		if err != nil {
			return nil, err
		}
		end := off + wire.HeaderSize + h.PayloadLen()
		if end > len(resp) || h.Kind < wire.KindStreamOpen || h.Kind > wire.KindStreamReset {
			return nil, fmt.Errorf("%w: lane reply frame kind %d, %d of %d bytes", wire.ErrBadFrame, h.Kind, len(resp)-off, end-off)
		}
		if last != nil {
			// After the end, strays: a reset of data the server read
			// after it (an open it refused and that open's message).
			off = end
			continue
		}
		if h.Kind == wire.KindStreamData {
			// Counted as the server counts it: a frame holding only
			// headers is no message.
			if _, body, err := wire.StreamBody(&h, resp[off+wire.HeaderSize:end]); err == nil && len(body) > 0 {
				r.msgs++
				r.bytes += int64(h.PayloadLen())
				r.conn += int64(h.PayloadLen())
			}
		}
		if lend && h.Kind == wire.KindStreamData && end-off >= wire.AliasMin {
			if err := wire.CheckStreamHeader(&h); err != nil {
				return nil, err
			}
			r.loan.Lend()
			r.cs.s.c.lanes.streamRoutes.lent.Add(1)
			if err := fileData(r.sc, &h, resp[off+wire.HeaderSize:end], streamcore.Msg{Loan: r.loan}); err != nil {
				return nil, err
			}
			off = end
			continue
		}
		// Sized for the frame: a large message is not grown into from a
		// small pooled buffer (fresh memory, faulted in, every message).
		bp := wire.GetBufSize(end - off)
		*bp = append((*bp)[:0], resp[off:end]...)
		if (h.Kind == wire.KindStreamEnd || h.Kind == wire.KindStreamReset) && h.Seqid == r.cs.id {
			last = &lastFrame{h: h, bp: bp}
		} else if err := fileStreamFrame(r.sc, &h, bp); err != nil {
			return nil, err
		}
		off = end
	}
	return last, nil
}

// fail ends the stream with err (unless it ended already) and drops the
// lane (broken: out of step with its server, which then ends its side).
func (r *laneRunner) fail(err error, broken bool) {
	// Canceled, and the handshake cut short: counted once the lane is on
	// its way out.
	defer r.released(r.cs.ctx.Err() != nil && broken, false)
	r.finish()
	r.end(err)
	if broken {
		r.l.broken.Store(true)
	}
	if r.loan == nil {
		r.p.put(r.l)
		return
	}
	// Not closed (its memory unmapped) under a message its caller may
	// still read: its link goes now, so the server ends its side, and the
	// rest once the caller gave the message back.
	p, l := r.p, r.l
	if broken && r.loan.Out() > 0 {
		l.link.Close()
	}
	r.loan.Finally(func() { p.put(l) })
}

// endsStream reports whether the server's frames b hold stream id's end
// or reset.
func endsStream(b []byte, id int32) bool {
	for off := 0; off+wire.HeaderSize <= len(b); {
		h, err := wire.DecodeHeader(b[off:], len(b))
		if err != nil {
			return false
		}
		if (h.Kind == wire.KindStreamEnd || h.Kind == wire.KindStreamReset) && h.Seqid == id {
			return true
		}
		off += wire.HeaderSize + h.PayloadLen()
	}
	return false
}

// end ends the stream with err, unless it ended already.
func (r *laneRunner) end(err error) {
	cs := r.cs
	cs.peerDone.Store(true)
	r.sc.Fail(err)
	cs.gotHeader(nil)
	cs.release()
	r.out.Close()
}

// StreamRoutes counts the streams whose plan put them on a lane: Lane
// took one, TCP went over the session's TCP connection because every
// lane of the function was busy (streams do not wait for a lane).
func (c *Conn) StreamRoutes() (lane, tcp uint64) {
	return c.lanes.streamRoutes.lane.Load(), c.lanes.streamRoutes.tcp.Load()
}
