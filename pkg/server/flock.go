//go:build cgo && linux

package server

import (
	"context"
	"runtime"
	"sync"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/flock"
	"github.com/hatrpc/hatrpc/pkg/flock/flockmetrics"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
	"github.com/hatrpc/hatrpc/pkg/rdma"
	"github.com/hatrpc/hatrpc/pkg/stream"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// FLOCK (qp_sharing): functions whose client plan shares QPs reach the
// server through one FLOCK handle per client process rather than lanes of
// their own (docs/design/lanes.md). The server side is one flock.Server
// per device for all of them; its workers run the calls through the same
// frame path as lanes.

// flockHandler is the FLOCK handler id every HatRPC frame travels under.
const flockHandler = 0

// flockState is the server's FLOCK side: one flock.Server per device
// clients arrived on (a 0.0.0.0 listener on two NICs has two), each made
// on its device's first attach; one set of flock_* metrics for all.
type flockState struct {
	mu     sync.Mutex
	devs   map[*rdma.Device]*flockDev
	met    *flock.Metrics // the flock_* series on the server's registry
	closed bool
}

// flockDev is the FLOCK side on one device.
type flockDev struct {
	srv  *flock.Server
	dev  *fastpath.Device
	conn *conn        // the pseudo-connection its FLOCK calls run on
	sess *laneSession // its FLOCK session (replies in buffers of their own: calls run concurrently)
}

// flockServer returns the server's flock.Server on d, creating it on first
// use. A failed creation (the device out of memory during a flood, say) is
// not remembered: the next attach tries again.
func (s *Server) flockServer(d *fastpath.Device, tr uint8) (*flock.Server, error) {
	f := &s.flock
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrServerClosed
	}
	if fd := f.devs[d.Device]; fd != nil {
		return fd.srv, nil
	}
	if f.met == nil {
		// The flock_* series appear with FLOCK serving, as a lane
		// transport's appear with its first lane; once, so that a retried
		// creation keeps counting into them.
		f.met = flock.NewMetrics()
		if err := s.reg.Register(flockmetrics.New(f.met)); err != nil {
			s.log.Warn("hatrpc: FLOCK metrics not exported", "err", err)
		}
	}
	fd := &flockDev{dev: d}
	// Handlers may block (a write waiting for its group commit), so the
	// pool is sized like a connection's concurrency, not the cores. A
	// reply stays charged to the budget until FLOCK posted it (flockSent).
	fs, err := flock.NewServer(d.Device, flock.WithMetrics(f.met),
		flock.WithSent(func(_ uint16, size int) { fd.sess.flockSent(size) }),
		flock.WithWorkers(min(max(64, 8*runtime.NumCPU()), s.opts.maxCalls)),
		flock.WithInline(func(_ uint16, req []byte) bool { return s.neverBlocks(req) }),
		flock.WithMaxMessage(fastpath.FlockMaxMessage), flock.WithRingSize(fastpath.FlockRing),
		flock.WithMaxReply(s.opts.limits.MaxMessageSize+wire.HeaderSize))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The pseudo-connection never finishes by itself (readDone stays
	// false); the server's Close cancels its context.
	fd.srv = fs
	fd.conn = &conn{s: s, ctx: ctx, cancel: cancel, remote: "flock", pseudo: true, held: map[uint64]*[]byte{},
		shard: s.connSeq.Add(1)}
	s.budget.markFastPath(fd.conn) // FLOCK is the fast path's, as lanes are
	// The FLOCK session replies by FLOCK, never by its own protocol; its
	// side is the default table's, for the buffers it would size.
	t := serverTable(hints.Set{}, 0, transport.Transports[tr].Hint, stream.None)
	fd.sess = &laneSession{c: fd.conn, l: &lane{fn: fastpath.FlockFunction, tr: tr, viaFLOCK: true,
		side: fastpath.PlanSide(&t, s.opts.limits.MaxMessageSize+wire.HeaderSize),
		in:   s.met.bytesIn.WithLabelValues(transportNames[tr]),
		out:  s.met.bytesOut.WithLabelValues(transportNames[tr])}}
	sess := fd.sess
	// A reply larger than a FLOCK message travels in parts that the
	// client joins (pkg/flock), so no reply size fails here.
	// req is valid until this returns (the ring slot a dispatcher's
	// inline call reads is released after it, a worker's copy is its
	// own), and the reply is encoded before: borrowed arguments alias req.
	// The reply goes into FLOCK's storage for it (dst), reused once the
	// reply is posted: no allocation per call.
	fs.HandleAppend(flockHandler, func(_ context.Context, req, dst []byte) ([]byte, error) {
		return sess.callFLOCK(req, dst), nil
	})
	if f.devs == nil {
		f.devs = map[*rdma.Device]*flockDev{}
	}
	f.devs[d.Device] = fd
	return fs, nil
}

// neverBlocks reports whether a FLOCK request frame calls a function
// whose server hints say never_blocks, so the FLOCK dispatcher may run it
// itself (no copy of the request, no worker wake-up). Only when a call
// slot is free: waiting for one would stall the dispatcher. Anything it
// cannot read goes to a worker, which answers the error.
func (s *Server) neverBlocks(req []byte) bool {
	return !s.slots.full() && s.hintedNeverBlocks(req)
}

// hintedNeverBlocks reports whether a request frame calls a two-way
// function whose server hints say never_blocks.
func (s *Server) hintedNeverBlocks(req []byte) bool {
	h, err := wire.DecodeHeader(req, s.opts.limits.MaxMessageSize)
	if err != nil || h.Kind != wire.KindCall {
		return false
	}
	mh, err := wire.ParseMsgHeader(h.Protocol(), req[wire.HeaderSize:])
	if err != nil {
		return false
	}
	m := s.lookup(mh.Name)
	return m != nil && m.set.NeverBlocks && !m.m.Oneway
}

// cancelFlock cancels the contexts of the FLOCK calls running (Close).
func (s *Server) cancelFlock() {
	f := &s.flock
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true // no FLOCK after this
	for _, fd := range f.devs {
		fd.conn.cancel()
	}
}

// closeFlock stops the FLOCK side once no call can arrive any more.
func (s *Server) closeFlock() {
	s.cancelFlock()
	f := &s.flock
	f.mu.Lock()
	fds := make([]*flockDev, 0, len(f.devs))
	for _, fd := range f.devs {
		fds = append(fds, fd)
	}
	f.mu.Unlock()
	for _, fd := range fds {
		_ = fd.srv.Close()
	}
}

// serveFlock accepts a client process's FLOCK handle on the connection and
// keeps the connection as the handle's liveness link until either side
// goes; the calls themselves run on the FLOCK workers.
func (ls *laneSession) serveFlock(d *fastpath.Device) {
	c, l := ls.c, ls.l
	fs, err := c.s.flockServer(d, l.tr)
	if err != nil {
		c.s.log.Warn("hatrpc: qp_sharing unavailable", "err", err)
		return
	}
	bctx, cancel := context.WithTimeout(c.ctx, c.s.laneBudget.lim.SetupTimeout)
	peer, err := fs.Accept(bctx, d.Device, wire.BufConn(c.nc, c.br))
	cancel()
	if err != nil {
		c.s.log.Info("hatrpc: flock attach failed", "remote", c.remote, "err", err)
		return
	}
	l.grant.ready()
	// Whatever ends the handle — the client process leaving or dying (the
	// link), the server draining or closing, a failed write to it (the
	// peer tears itself down) — releases everything the server holds for
	// it: QPs, rings, registered memory, the peer mapping.
	c.s.met.flockPeers.Inc()
	defer c.s.met.flockPeers.Dec()
	defer peer.Close()
	l.link = fastpath.Watch(c.nc, nil, func() { c.cancel() })
	defer l.link.Close()
	defer ls.run()()
	select {
	case <-c.ctx.Done():
	case <-l.stop:
	case <-peer.Done():
		// Usually the client process just exited and its link closes too.
		c.s.log.Debug("hatrpc: flock peer dropped", "remote", c.remote, "err", peer.Err())
	}
}
