package client

import (
	"errors"
	"os"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// A server stream's consumer reading the socket itself.
//
// While a stream is open some goroutine holds the connection's read role
// (reader.go). With a reader goroutine doing it, every message of a bulk
// server stream cost a hand-off: the reader filed it and woke RecvMsg
// (2.1 futex calls a message for 64 KiB messages, and the client's CPU
// 1.04 s against the raw floor's 0.82 for 4 GiB; docs/performance/
// history.md, "the credit's round trip"). So when a server stream is the
// connection's only open stream and no call waits for a reply, the role
// is parked with it rather than held by a goroutine: nobody reads while
// the consumer is away, and its RecvMsg, finding nothing queued, takes
// the role and reads until a frame of its stream comes, as a lone unary
// caller reads its reply (lead). Whoever else needs the connection takes
// a parked role as a free one: a call's caller (await) and a new stream
// (newStream, which starts the reader goroutine), so neither waits for
// the consumer; a consumer reading hands replies for other callers to
// them as it goes, and gives the role to a waiting caller, or to the
// reader goroutine, when its own frame came and it may not park. The
// reader goroutine parks the role again once it filed a message for the
// lone stream with no call outstanding (readIdle).
//
// A parked role means nobody reads between two RecvMsg calls: frames
// for the stream wait in the socket (its window bounds them), and the
// server's GoAway or its close is found by the next RecvMsg or call.

// parkIdle is readIdle's: once it filed a frame of stream id, it parks
// the role with that stream when it may (mayParkLocked) and wakes the
// stream's consumer, which may be waiting in RecvMsg for a message while
// nobody would read now. It reports whether it parked.
func (s *session) parkIdle(id int32) bool {
	st := s.st.Get(id)
	if st == nil {
		return false
	}
	cs := st.Owner.(*clientStream)
	if !cs.selfRead {
		return false
	}
	s.mu.Lock()
	if !s.reading || !s.mayParkLocked(cs) {
		s.mu.Unlock()
		return false
	}
	s.reading = false
	s.mu.Unlock()
	st.Wake()
	return true
}

// recvRead is cs's read for streamcore.Stream.RecvReading: it takes the
// read role when nobody holds it and reads frames until one of cs's
// comes or cs ends (true), or reports false when another goroutine
// reads.
func (s *session) recvRead(cs *clientStream) bool {
	s.mu.Lock()
	if cs.readStop { // ended: RecvReading finds why
		s.mu.Unlock()
		return true
	}
	if s.reading || s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.reading = true
	s.streamLeader, s.leadStop = cs, false
	s.mu.Unlock()
	for {
		_, err := s.br.Peek(1)
		s.mu.Lock()
		if err == nil {
			s.midFrame = true
			if s.leadStop {
				// Ended while the frame began: read it whole, as lead
				// does, rather than desync the connection.
				_ = s.nc.SetReadDeadline(time.Now().Add(midFrameGrace))
			}
		} else if s.leadStop && errors.Is(err, os.ErrDeadlineExceeded) && s.err == nil {
			s.endStreamLeadLocked(false)
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		var (
			rseq int32
			bp   *[]byte
			off  int
			ok   bool
		)
		s.filedID = 0
		if err == nil {
			rseq, bp, off, ok, err = s.readOne()
		}
		if err != nil {
			s.fail(err)
			s.mu.Lock()
			s.endStreamLeadLocked(false)
			s.mu.Unlock()
			return true
		}
		s.mu.Lock()
		s.midFrame = false
		if ok {
			s.deliverLocked(rseq, bp, off)
		}
		if s.filedID == cs.id || s.leadStop {
			if s.filedID == cs.id {
				s.selfReads++
			}
			s.endStreamLeadLocked(s.mayParkLocked(cs))
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
	}
}

// deliverLocked hands the reply for seq (in bp from off) to its caller,
// or drops it when its caller gave up; s.mu is held.
func (s *session) deliverLocked(seq int32, bp *[]byte, off int) {
	cl := s.pending.take(seq)
	s.handOver(cl, bp, off)
}

// handOver wakes cl, a caller taken off s.pending, with its reply (in bp
// from off), or drops the reply when cl is nil (its caller gave up); s.mu
// is held by the read role's holder.
func (s *session) handOver(cl *call, bp *[]byte, off int) {
	if cl == nil {
		wire.PutBuf(bp)
		return
	}
	cl.reply, cl.off = bp, off
	s.spareFromLocked(cl)
	cl.signaled = true
	cl.done <- struct{}{}
}

// spareFromLocked takes the reply buffer cl kept from its last call
// (call.rep) as the one the read role reads the next reply into, if the
// role has none: the reply buffers then go round between the reader and
// the callers without the pool (two pool operations a call, ~120 of a
// 64-caller 512 B call's ~10,400 instructions, scripts/insn-ab.sh). s.mu
// is held by the read role's holder, which alone uses s.repSpare.
func (s *session) spareFromLocked(cl *call) {
	s.repSpare.From(&cl.rep)
}

// mayParkLocked reports whether the read role may be parked with cs, a
// stream a frame was just filed for: it reads itself, it is the
// session's only stream and no call is outstanding; s.mu is held.
func (s *session) mayParkLocked(cs *clientStream) bool {
	return cs.selfRead && !cs.uncounted && !cs.readStop && s.streams == 1 && s.pending.len() == 0 && s.err == nil
}

// endStreamLeadLocked gives up the read role a stream's consumer held:
// parked with the stream (nobody reads until someone takes it), or
// passed on as a call's caller passes it; s.mu is held.
func (s *session) endStreamLeadLocked(park bool) {
	s.streamLeader, s.leadStop, s.midFrame = nil, false, false
	if s.deadline {
		s.deadline = false
		_ = s.nc.SetReadDeadline(time.Time{})
	}
	if park {
		s.reading = false
		return
	}
	s.releaseLocked()
}

// stopStreamRead makes cs, which is ending, read no more: a consumer of
// cs reading now has its read interrupted (unless a frame is half read),
// and a later one does not take the role.
func (s *session) stopStreamRead(cs *clientStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs.readStop = true
	if s.streamLeader != cs || s.err != nil || s.leadStop {
		return
	}
	s.leadStop = true
	s.deadline = true
	if s.midFrame {
		_ = s.nc.SetReadDeadline(time.Now().Add(midFrameGrace))
	} else {
		_ = s.nc.SetReadDeadline(time.Unix(1, 0))
	}
}
