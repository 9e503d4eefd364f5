package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Reading replies: the read role.
//
// At most one goroutine reads the socket at a time; it holds the read role
// (session.reading). A caller waiting for its reply takes the role when
// nobody holds it and reads itself: a lone caller gets its reply without a
// goroutine handoff. Replies for other callers are passed to them; when its
// own reply arrives the caller hands the role to a waiting caller or, when
// none waits, drops it. A connection with no call outstanding is watched
// by the idle reader, started idleDelay after the role was dropped, so a
// server that goes away or drains is noticed between calls. A server
// stream that is the connection's only one reads its frames in RecvMsg
// in the same way (stream_read.go).

// idleDelay is how long a connection may go unwatched after its last
// reply: long next to a call, short for noticing a vanished server.
const idleDelay = time.Millisecond

// midFrameGrace bounds how long a caller whose context ended keeps reading
// the rest of a frame that already started; the stream cannot be resumed
// mid-frame, so a server stalling longer than that fails the connection.
const midFrameGrace = 2 * time.Second

var errRetry = errors.New("client: retry")

// await waits for the reply of cl (seq), reading it itself when nobody
// reads. nil means cl.reply or cl.err is set.
func (s *session) await(ctx context.Context, cl *call, seq int32) error {
	for {
		s.mu.Lock()
		if s.err != nil && !cl.signaled {
			// Handed the read role as the session failed: nobody else
			// will signal this call.
			err := s.connErrLocked()
			s.mu.Unlock()
			return err
		}
		if !s.reading && s.err == nil && !cl.signaled {
			s.reading = true
			s.mu.Unlock()
			if err := s.lead(ctx, cl, seq); err != errRetry {
				return err
			}
			continue
		}
		cl.waiting = true
		// When the session's kept watch is on this caller's context (the
		// callers of a Conn often share one), it wakes the caller should
		// the context end, and the caller waits on its own channel alone:
		// a select with the context's Done channel locks that channel,
		// which every caller sharing the context contends for, twice.
		done := ctx.Done()
		watched := done == nil
		if w := s.watch; !watched && w != nil && w.done == done && !w.fired {
			cl.watch, watched = w, true
		}
		s.mu.Unlock()
		if watched {
			<-cl.done
		} else {
			select {
			case <-cl.done:
			case <-done:
				s.mu.Lock()
				if !cl.signaled { // nothing is on its way: withdraw
					cl.waiting = false
					s.pending.take(seq)
					s.mu.Unlock()
					s.abandon(cl, seq)
					return ctx.Err()
				}
				s.mu.Unlock()
				<-cl.done
			}
		}
		if !cl.lead && cl.woke == wokeReply {
			// Its reply or the session's failure: the record left the
			// pending table before the wake (handOver's caller took it,
			// fail empties the table), so no other goroutine looks at it
			// any more, and it is reset without s.mu, which every call
			// took a second time here, from both CPUs.
			cl.waiting, cl.signaled, cl.watch = false, false, nil
			return nil
		}
		s.mu.Lock()
		lead, woke := cl.lead, cl.woke
		cl.waiting, cl.signaled, cl.lead, cl.watch, cl.woke = false, false, false, nil, wokeReply
		switch woke {
		case wokeCtx: // the watch withdrew it (fired)
			s.mu.Unlock()
			s.abandon(cl, seq)
			return ctx.Err()
		case wokeAgain: // the watch it relied on was replaced
			s.mu.Unlock()
			continue
		}
		if !lead {
			s.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil { // handed the role after giving up: pass it on
			s.pending.take(seq)
			s.releaseLocked()
			s.mu.Unlock()
			s.abandon(cl, seq)
			return ctx.Err()
		}
		s.mu.Unlock()
		if err := s.lead(ctx, cl, seq); err != errRetry {
			return err
		}
	}
}

// abandon recycles the call record of a caller that gave up and tells a
// HatRPC server to stop working on it.
func (s *session) abandon(cl *call, seq int32) {
	cl.cancelled = false
	putCall(cl)
	if s.hat {
		s.sendCancel(seq)
	}
}

// lead reads frames with the read role held until the reply of cl arrives
// (nil), the caller's context ends (its error) or the session fails
// (errRetry: cl then gets the failure on cl.done).
func (s *session) lead(ctx context.Context, cl *call, seq int32) error {
	done := ctx.Done()
	s.mu.Lock()
	s.leader, s.leaderDone = cl, done
	s.mu.Unlock()
	// The context is watched only once the read would block: under load
	// replies are mostly buffered already and the watch would cost more
	// than the read.
	watched := false
	for {
		if !watched && done != nil && s.br.Buffered() == 0 {
			watched = true
			s.watchDone(ctx, done)
		}
		if s.br.Buffered() == 0 && tcpCalls.Load() == 1 {
			s.spin.Arm() // the process's only call: its reply is about to come
		}
		_, err := s.br.Peek(1)
		// A frame buffered whole is read without the socket, which a
		// deadline set by interrupt cannot cut short (the next read
		// sees it): the mid-frame mark, a lock a reply, is not needed.
		if err != nil || !s.hat || !wire.FrameBuffered(s.br) {
			s.mu.Lock()
			if err == nil {
				s.midFrame = true
				if cl.cancelled {
					_ = s.nc.SetReadDeadline(time.Now().Add(midFrameGrace))
				}
			} else if cl.cancelled && errors.Is(err, os.ErrDeadlineExceeded) && s.err == nil {
				s.pending.take(seq)
				s.endLeadLocked()
				s.mu.Unlock()
				s.abandon(cl, seq)
				return ctx.Err()
			}
			s.mu.Unlock()
		}
		var (
			rseq int32
			bp   *[]byte
			off  int
			ok   bool
		)
		if err == nil {
			rseq, bp, off, ok, err = s.readOne()
		}
		if err != nil {
			s.fail(err)
			s.mu.Lock()
			s.endLeadLocked()
			s.mu.Unlock()
			return errRetry
		}
		s.mu.Lock()
		s.midFrame = false
		if !ok {
			s.mu.Unlock()
			continue
		}
		other := s.pending.take(rseq)
		if other == cl {
			cl.reply, cl.off = bp, off
			s.spareFromLocked(cl)
			s.endLeadLocked()
			s.mu.Unlock()
			return nil
		}
		s.handOver(other, bp, off) // nil: its caller gave up before the reply came
		if cl.cancelled || (!watched && ctx.Err() != nil) {
			s.pending.take(seq)
			s.endLeadLocked()
			s.mu.Unlock()
			s.abandon(cl, seq)
			return ctx.Err()
		}
		s.mu.Unlock()
	}
}

// ctxWatch is a registration of context.AfterFunc on a Done channel.
// Registering per call costs three allocations and two locked updates of
// the context; callers usually call with the same context over and over,
// so the last registration is kept (until another context takes the read
// role, the session fails or the connection idles) and reused.
type ctxWatch struct {
	s     *session
	done  <-chan struct{}
	stop  func() bool
	fired bool // guarded by s.mu
}

// fire runs once the context ended: it withdraws the callers that wait on
// this watch (see await) and interrupts the read role's holder.
func (w *ctxWatch) fire() {
	s := w.s
	s.mu.Lock()
	w.fired = true
	for seq, cl := range s.pending.all() {
		if cl.watch == w && cl.waiting && !cl.signaled {
			s.pending.take(seq)
			cl.woke, cl.signaled = wokeCtx, true
			cl.done <- struct{}{}
		}
	}
	s.mu.Unlock()
	s.interrupt(w.done)
}

// Why a waiting caller was woken (call.woke).
const (
	wokeReply uint8 = iota // its reply, the read role or the session's failure
	wokeCtx                // its context ended: it was withdrawn (ctxWatch.fire)
	wokeAgain              // the watch it relied on went: wait again
)

// unwatchLocked wakes the callers waiting on w, which is being replaced,
// to wait again (on their context themselves); s.mu is held.
func (s *session) unwatchLocked(w *ctxWatch) {
	for _, cl := range s.pending.all() {
		if cl.watch == w && cl.waiting && !cl.signaled {
			cl.woke, cl.signaled = wokeAgain, true
			cl.done <- struct{}{}
		}
	}
}

// watchDone makes sure the end of ctx (whose Done channel is done)
// interrupts the read role while a caller of ctx holds it. Contexts are
// told apart by their Done channel: contexts that share one end together.
func (s *session) watchDone(ctx context.Context, done <-chan struct{}) {
	s.mu.Lock()
	if s.watch != nil && s.watch.done == done {
		s.mu.Unlock()
		// The kept registration has fired already if ctx ended before
		// this caller took the role: interrupt on its behalf.
		if ctx.Err() != nil {
			s.interrupt(done)
		}
		return
	}
	s.mu.Unlock()
	w := &ctxWatch{s: s, done: done}
	w.stop = context.AfterFunc(ctx, w.fire)
	s.mu.Lock()
	old := s.watch
	if s.err != nil {
		old, w = w, nil // fail already dropped the watch
	} else if old != nil {
		s.unwatchLocked(old)
	}
	s.watch = w
	s.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// dropWatchLocked forgets the kept context watch, returning it for the
// caller to stop once s.mu is released.
func (s *session) dropWatchLocked() *ctxWatch {
	w := s.watch
	if w != nil {
		s.unwatchLocked(w)
	}
	s.watch = nil
	return w
}

// interrupt runs when a context ends whose caller may hold the read role:
// it makes the blocked read return, unless a frame is half read.
func (s *session) interrupt(done <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leader == nil || s.leaderDone != done || s.err != nil {
		return
	}
	s.leader.cancelled = true
	s.deadline = true
	if s.midFrame {
		_ = s.nc.SetReadDeadline(time.Now().Add(midFrameGrace))
	} else {
		_ = s.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// endLeadLocked gives up the read role held by a caller; s.mu is held.
func (s *session) endLeadLocked() {
	s.leader, s.leaderDone, s.midFrame = nil, nil, false
	if s.deadline {
		s.deadline = false
		_ = s.nc.SetReadDeadline(time.Time{})
	}
	s.releaseLocked()
}

// releaseLocked passes the read role to a waiting caller, or drops it
// (arming the idle reader when no call is outstanding); s.mu is held.
func (s *session) releaseLocked() {
	for _, cl := range s.pending.all() {
		if cl.waiting && !cl.signaled {
			cl.lead, cl.signaled = true, true
			cl.done <- struct{}{}
			return
		}
	}
	s.reading = false
	if s.err != nil {
		s.closeDoneLocked()
		return
	}
	if s.streams > 0 {
		// Open streams need a reader whether or not a call waits (it
		// parks the role with a lone server stream: stream_read.go).
		s.reading = true
		go s.readIdle()
		return
	}
	if s.pending.len() == 0 && !s.idleArmed {
		s.idleArmed = true
		s.idle.Reset(idleDelay)
	}
}

func (s *session) closeDoneLocked() {
	if !s.doneClosed {
		s.doneClosed = true
		close(s.done)
	}
}

// idleRead runs on the idle timer: it watches a connection nobody reads.
func (s *session) idleRead() {
	s.mu.Lock()
	s.idleArmed = false
	if s.reading || s.err != nil || s.pending.len() > 0 {
		s.mu.Unlock()
		return
	}
	s.reading = true
	// An idle connection must not keep its callers' contexts referenced.
	w := s.dropWatchLocked()
	s.mu.Unlock()
	if w != nil {
		w.stop()
	}
	s.readIdle()
}

// readIdle reads with the role held and no caller of its own: it delivers
// replies until no call is outstanding, then drops the role.
func (s *session) readIdle() {
	for {
		s.filedID = 0
		seq, bp, off, ok, err := s.readOne()
		if err != nil {
			s.fail(err)
			s.mu.Lock()
			s.releaseLocked()
			s.mu.Unlock()
			return
		}
		if !ok && s.filedID != 0 && s.parkIdle(s.filedID) {
			return // the stream's consumer reads now (stream_read.go)
		}
		s.mu.Lock()
		if ok {
			s.deliverLocked(seq, bp, off)
			// While streams are open this goroutine keeps the role and
			// hands replies over, rather than passing the role to a
			// waiting caller and starting again after its reply.
			if s.streams == 0 && (s.pending.len() == 0 || s.anyWaitingLocked()) {
				s.releaseLocked()
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
	}
}

func (s *session) anyWaitingLocked() bool {
	for _, cl := range s.pending.all() {
		if cl.waiting && !cl.signaled {
			return true
		}
	}
	return false
}

// readOne reads one frame or message. ok is false for frames handled here
// (GoAway); otherwise bp holds the reply for seq from offset off.
func (s *session) readOne() (seq int32, bp *[]byte, off int, ok bool, err error) {
	lim := &s.c.o.limits
	bp = s.repSpare.Get()
	if s.hat {
		var h wire.Header
		h, *bp, err = wire.ReadFrameFrom(s.br, s.spin.Reader(s.nc), *bp, lim.MaxMessageSize)
		if err == nil {
			switch h.Kind {
			case wire.KindReply, wire.KindException:
				off := wire.HeaderSize
				if h.Flags&wire.FlagHeaders != 0 {
					var n int
					if n, err = wire.HeaderBlockLen((*bp)[off:]); err != nil {
						break
					}
					off += n
				}
				return h.Seqid, bp, off, true, nil
			case wire.KindGoAway:
				s.drain()
				wire.PutBuf(bp)
				return 0, nil, 0, false, nil
			case wire.KindStreamData, wire.KindStreamWindow, wire.KindStreamEnd, wire.KindStreamReset:
				return 0, nil, 0, false, s.streamFrame(&h, bp) // stream.go
			default:
				err = fmt.Errorf("%w: unexpected frame kind %d from server", wire.ErrBadFrame, h.Kind)
			}
		}
	} else {
		*bp, err = wire.ReadMessage(s.br, s.format, *bp, lim)
		off := 0
		if err == nil && s.format.Header {
			off, err = s.readTHeader(bp)
		}
		if err == nil {
			var mh wire.MsgHeader
			if mh, err = wire.ParseMsgHeader(s.format.Proto, (*bp)[off:]); err == nil {
				return mh.Seqid, bp, off, true, nil
			}
		}
	}
	wire.PutBuf(bp)
	return 0, nil, 0, false, err
}

// drain takes the session out of use for new calls (the server's GoAway,
// or the client retiring it); the calls it has keep their replies.
func (s *session) drain() {
	s.mu.Lock()
	s.goaway = true
	s.down.Store(true)
	s.mu.Unlock()
}

// fail marks the session broken, closes it and fails pending calls whose
// callers are not already being signalled.
func (s *session) fail(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = cause
	s.down.Store(true)
	s.idle.Stop()
	s.idleArmed = false
	cerr := s.connErrLocked()
	w := s.dropWatchLocked()
	for _, cl := range s.pending.all() {
		if cl.signaled {
			continue // handed the read role: it finds s.err and waits again
		}
		cl.err = cerr
		cl.signaled = true
		cl.done <- struct{}{}
	}
	s.pending = callTable{}
	if !s.reading {
		s.closeDoneLocked()
	}
	s.mu.Unlock()
	if w != nil {
		w.stop()
	}
	s.nc.Close()
	s.failStreams(cerr) // stream.go
}

// connErrLocked is the error of calls failed with the session; s.mu is held.
func (s *session) connErrLocked() error {
	if ce, ok := s.err.(*ConnError); ok {
		return ce
	}
	return &ConnError{Op: "read", Err: s.err}
}
