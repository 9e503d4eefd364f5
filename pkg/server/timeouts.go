package server

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Connection time limits.
//
// Without them a connection that sends nothing, or a frame a byte a
// second, holds its socket, goroutine and buffers for ever: 10,000 idle
// sockets locked every legitimate client out (max connections), 1,000
// slowloris ones were never closed (issue 18). So each connection is in
// one of four phases, which its reader records as it goes (two atomic
// stores a message, no clock read: times come from a coarse clock the
// sweeper advances), and one sweeper goroutine per server looks at every
// connection a few times per shortest limit:
//
//	handshake  accepted, first message not complete: handshakeTimeout
//	idle       at a message boundary, nothing buffered: idleTimeout once
//	           no call runs on the connection either
//	frame      a message has started to arrive: after readGrace its
//	           bytes must keep up with minReadRate on average, and
//	           some must have come in the last readGrace
//	busy       the reader has a message, runs it or waits for a call
//	           slot or memory (the server's doing, not the client's)
//
// A connection over a limit gets its read deadline set in the past; its
// reader fails and closes it as it would any broken connection. An idle
// HatRPC connection is first sent a GoAway, so its client dials anew for
// its next call instead of racing the close, and closed idleGrace later.
const (
	phHandshake uint32 = iota
	phIdle
	phFrame
	phBusy
)

// idleGrace is how long an idle HatRPC connection stays open after its
// GoAway, for a call its client sent before it saw the GoAway.
const idleGrace = time.Second

// Close reasons (label of hatrpc_server_connections_closed_total).
const (
	whyNone uint32 = iota
	whyClient
	whyBadInput
	whyReadError
	whyWriteError
	whyShutdown
	whyHandshake
	whyIdle
	whySlow
	whyLane
	numWhy
)

var whyNames = [numWhy]string{"", "client_closed", "bad_input", "read_error", "write_error", "shutdown",
	"handshake_timeout", "idle_timeout", "slow_read", "lane_closed"}

// meter counts the bytes read from the socket and marks the start of a
// message arriving at an idle connection. It sits under the bufio.Reader
// and is also the raw reader large frames are read from.
type meter struct {
	c *conn
	r io.Reader
}

func (m *meter) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.count(n)
	return n, err
}

// ReadAhead is Read by wire.ReadAhead: the bytes it takes beyond p are
// counted when a Read returns them.
func (m *meter) ReadAhead(p []byte) (int, error) {
	n, err := wire.ReadAhead(m.r, p)
	m.count(n)
	return n, err
}

func (m *meter) count(n int) {
	if n > 0 {
		c := m.c
		c.lastIn.Store(c.s.clock.Load())
		in := c.inBytes.Add(int64(n))
		if c.phase.Load() == phIdle {
			c.enter(phFrame, in-int64(n))
		}
	}
}

// enter records that the connection's reader entered phase ph now; base
// is the byte count the frame phase measures progress from.
func (c *conn) enter(ph uint32, base int64) {
	c.since.Store(c.s.clock.Load())
	c.base.Store(base)
	c.phase.Store(ph)
}

// atBoundary records the reader's phase before it reads the next message;
// whole says that message is buffered whole.
func (c *conn) atBoundary(whole bool) {
	switch {
	case !c.greeted:
		// The handshake phase runs from accept to the first message.
	case whole:
		// The whole message is here: reading it cannot stall, so the
		// reader stays busy (no phase stores, each a full barrier, for
		// every call of a pipelined burst).
	case c.br.Buffered() > 0 || c.overHTTP():
		// An HTTP body is one request until its end: a pause between
		// its messages is a slow read, not an idle connection.
		c.enter(phFrame, c.inBytes.Load())
	default:
		c.enter(phIdle, 0)
		if c.calls.size() > pruneIdle {
			c.calls.pruneAll() // an idle connection keeps few ended calls
		}
	}
}

// busy records that the reader holds a whole message (or waits for the
// server); the first one ends the handshake phase.
func (c *conn) busy() {
	c.greeted = true
	if c.phase.Load() != phBusy {
		c.phase.Store(phBusy)
	}
}

// expire closes the connection for reason why: its reader wakes up with a
// timeout and closes it. Only the first reason counts.
func (c *conn) expire(why uint32) {
	if c.why.CompareAndSwap(whyNone, why) {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// sweeper checks every connection against the time limits each tick
// until the server finishes.
func (s *Server) sweeper(tick time.Duration) {
	defer s.sweepWG.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.sweepQuit:
			return
		case <-t.C:
			s.sweep(time.Since(epoch))
		}
	}
}

// sweepTick is how often the sweeper looks: a tenth of the shortest limit,
// between 10 ms and 1 s.
func (o *options) sweepTick() time.Duration {
	d := time.Duration(0)
	for _, v := range []time.Duration{o.handshakeTimeout, o.idleTimeout, o.readGrace} {
		if v > 0 && (d == 0 || v < d) {
			d = v
		}
	}
	if d == 0 {
		return 0
	}
	return min(max(d/10, 10*time.Millisecond), time.Second)
}

// startSweeper starts the sweeper once, if any time limit is set.
func (s *Server) startSweeper() {
	s.sweepOnce.Do(func() {
		tick := s.opts.sweepTick()
		if tick == 0 || s.opts.manualSweep {
			return
		}
		s.sweepWG.Add(1)
		go s.sweeper(tick)
	})
}

func (s *Server) stopSweeper() {
	s.sweepOnce.Do(func() {}) // a sweeper cannot start after this
	s.sweepStop.Do(func() { close(s.sweepQuit) })
	s.sweepWG.Wait()
}

// sweep advances the coarse clock to now (time since epoch) and expires
// the connections over a limit.
func (s *Server) sweep(now time.Duration) {
	s.clock.Store(int64(now))
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if !c.pseudo {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	o := &s.opts
	for _, c := range conns {
		if c.why.Load() != whyNone {
			continue
		}
		age := now - time.Duration(c.since.Load())
		switch c.phase.Load() {
		case phHandshake:
			if o.handshakeTimeout > 0 && age >= o.handshakeTimeout {
				c.expire(whyHandshake)
			}
		case phFrame:
			if o.readGrace <= 0 || age < o.readGrace {
				continue
			}
			// Too slow on average since the message began, or stalled
			// for the grace period (a client that sent most of a frame
			// fast and stopped would otherwise keep a good average).
			got := c.inBytes.Load() - c.base.Load()
			stalled := now-time.Duration(max(c.lastIn.Load(), c.since.Load())) >= o.readGrace
			if stalled || float64(got) < float64(o.minReadRate)*(age-o.readGrace).Seconds() {
				c.expire(whySlow)
			}
		case phIdle:
			at := time.Duration(c.goawayAt.Load())
			if o.idleTimeout > 0 && age >= o.idleTimeout || at != 0 && now-at >= idleGrace {
				s.idle(c, now)
			}
		}
	}
}

// idle handles a connection idle for idleTimeout: a HatRPC one gets a
// GoAway and is closed once idle idleGrace after it, a plain one at once.
func (s *Server) idle(c *conn, now time.Duration) {
	c.mu.Lock()
	busy := c.inflight.Load() > 0 || c.fp != nil || c.draining
	c.mu.Unlock()
	if busy {
		return
	}
	if !c.upgraded.Load() {
		c.expire(whyIdle)
		return
	}
	at := time.Duration(c.goawayAt.Load())
	switch {
	case at == 0:
		c.goawayAt.Store(int64(now))
		// The write goes on its own goroutine: a client that stopped
		// reading must not stall the sweeper for the write timeout.
		s.callWG.Add(1)
		go func() {
			defer s.callWG.Done()
			var f [wire.HeaderSize]byte
			wire.SealFrame(f[:], wire.KindGoAway, 0, 0, 0)
			c.checkWrite(c.w.Write(f[:]))
		}()
	case now-at >= idleGrace:
		c.expire(whyIdle)
	}
}

// noteReadEnd records why the reader stopped, unless a reason is known.
func (c *conn) noteReadEnd(err error, draining bool) {
	why := whyReadError
	switch {
	case draining:
		why = whyShutdown
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		why = whyClient
	case errors.Is(err, proto.ErrInvalidData) || errors.Is(err, proto.ErrSizeLimit):
		why = whyBadInput
	}
	c.why.CompareAndSwap(whyNone, why)
}

// timeoutFields are the conn fields of the time limits.
type timeoutFields struct {
	phase    atomic.Uint32
	since    atomic.Int64 // coarse clock when the phase began
	base     atomic.Int64 // phFrame: inBytes when the message began
	inBytes  atomic.Int64 // bytes read from the socket
	lastIn   atomic.Int64 // coarse clock of the last bytes read
	goawayAt atomic.Int64 // coarse clock of the idle GoAway; 0 = none sent
	why      atomic.Uint32
	greeted  bool // reader-owned: the first message arrived
}
