package server

import (
	"io"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

func (c *conn) end() {
	c.s.callWG.Done()
	if c.pseudo {
		return
	}
	// The last call out finishes a connection whose reading stopped;
	// readFailed finishes one with none running. Each writes its side
	// before it reads the other's, so one of them sees both (maybeFinish
	// checks again under c.mu): a live connection's call takes no lock.
	if c.inflight.Add(-1) == 0 && c.readEnded.Load() {
		c.maybeFinish()
	}
}

// maybeFinish closes the connection once reading stopped and no call runs.
func (c *conn) maybeFinish() {
	c.mu.Lock()
	if !c.readDone || c.inflight.Load() > 0 || c.finished {
		c.mu.Unlock()
		return
	}
	c.finished = true
	lingers := c.lingers
	c.handoff.Stop()
	c.mu.Unlock()
	c.why.CompareAndSwap(whyNone, whyReadError)
	c.s.met.closed[c.why.Load()].Inc()
	c.w.Wait()
	c.cancel()
	if lingers {
		c.linger()
	}
	c.nc.Close()
	c.dropHeld() // reply.go
	c.s.removeConn(c)
}

// drain starts a graceful close: no more calls are read; HatRPC clients are
// told with a GoAway frame so they open a new connection for later calls.
func (c *conn) drain() {
	c.mu.Lock()
	c.draining = true
	c.drainFlag.Store(true)
	fp := c.fp
	c.mu.Unlock()
	if fp != nil {
		fp.stop() // a lane still bootstrapping sees draining and stops itself
		return
	}
	// The reader role may be mid-call; the frame only needs the writer.
	var f [wire.HeaderSize]byte
	wire.SealFrame(f[:], wire.KindGoAway, 0, 0, 0)
	if c.upgraded.Load() {
		_ = c.w.Write(f[:])
	}
	_ = c.nc.SetReadDeadline(time.Now())
}

// linger half-closes and drains unread input for a moment before the close:
// closing a socket with unread bytes sends a RST that can destroy the error
// reply still in flight to the client.
func (c *conn) linger() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	_ = cw.CloseWrite()
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, lingerBytes))
}

// abort closes the socket before cancelling the calls, so a handler that
// returns on cancellation cannot slip a "context canceled" reply out: the
// client sees its calls fail with the connection, as they did.
func (c *conn) abort() {
	c.nc.Close()
	c.cancel()
}
