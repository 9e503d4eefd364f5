package server

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

// The rdma/shm fast path (lanes.go, flock.go) is compiled only with cgo on
// Linux; elsewhere nofastpath.go stands in and the server serves TCP only.
// This file is what both builds share.

// ErrNoFastPath matches (errors.Is) the error of Serve on a server made
// WithRDMA("shm") or WithRDMA("ibv") in a binary built without the fast
// path (CGO_ENABLED=0, or not for Linux). WithRDMA("auto") serves TCP only
// there, as on a host without a usable provider.
var ErrNoFastPath = fastpath.ErrNotBuilt

// ErrBadProvider matches (errors.Is) the error of Serve with a WithRDMA
// provider name other than off, auto, shm and ibv.
var ErrBadProvider = fastpath.ErrBadProvider

// checkBuilt refuses a provider this binary lacks.
func checkBuilt(provider string) error {
	if _, err := fastpath.ParseProvider(provider); err != nil {
		return fmt.Errorf("server: WithRDMA(%q): %w", provider, err)
	}
	if transport.ProviderByName(provider) != nil && !fastpath.Built() {
		return fmt.Errorf("server: WithRDMA(%q): %w", provider, ErrNoFastPath)
	}
	return nil
}

// checkRDMAChoice parses the device/GID override (options, then the
// environment) and, when there is one, checks it against the host for the
// listener's address, so that a wrong name fails Serve, listing what exists.
func (s *Server) checkRDMAChoice(ln net.Addr) error {
	if s.opts.rdma == "" || s.opts.rdma == transport.ProviderSHM {
		return nil
	}
	sp, err := fastpath.RDMASpecFromEnv(s.opts.rdmaDevice, s.opts.rdmaGID)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.devMu.Lock()
	s.rdmaSpec = sp
	s.devMu.Unlock()
	if sp == (fastpath.RDMASpec{}) || !fastpath.Built() {
		return nil
	}
	var ip net.IP
	if ta, ok := ln.(*net.TCPAddr); ok {
		ip = ta.IP
	}
	if _, err := (fastpath.Selector{Spec: sp}).ForLocal(ip); err != nil {
		return fmt.Errorf("server: WithRDMADevice/WithRDMAGID: %w", err)
	}
	return nil
}

// localAddr is the address the client reached this server on; nil for the
// FLOCK pseudo-connection.
func (c *conn) localAddr() net.Addr {
	if c.nc == nil {
		return nil
	}
	return c.nc.LocalAddr()
}

// statsFor returns the method's metric children for a transport; those of
// the lane transports are made on first use, so a server shows only the
// transports it really serves.
func (s *Server) statsFor(m *method, tr uint8) *methodStats {
	if st := m.stats[tr]; st != nil {
		return st
	}
	p := &m.lstats[tr]
	if st := p.Load(); st != nil {
		return st
	}
	if st := s.newStats(m, tr); p.CompareAndSwap(nil, st) {
		s.met.track(st)
	}
	return p.Load()
}

// newStats makes m's metric children and call cells for transport tr,
// to be tracked (scraped) once they are the method's.
func (s *Server) newStats(m *method, tr uint8) *methodStats {
	st := s.met.forMethod(m.svc, m.m.Name, transportNames[tr])
	st.key = cellKey{m, tr}
	return st
}

// errAttached ends the reader of a connection that became a lane.
var errAttached = errors.New("server: connection became a lane")

// acquireLane takes a call slot, waiting up to the busy timeout while the
// server is at its concurrency limit (the wait holds the reader or the lane,
// and so the client); false when none came or the connection ended.
func (c *conn) acquireLane() bool {
	if c.acquireSlot() {
		c.begin()
		return true
	}
	return false
}

// acquireSlot is acquireLane without counting the call as the
// connection's (begin): for a dedicated lane's calls, which its
// connection's own goroutine runs (see laneSession.acquireSlot).
func (c *conn) acquireSlot() bool {
	if c.s.slots.tryAcquire() {
		return true
	}
	var timeout <-chan time.Time
	if d := c.s.opts.busyTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	if c.s.slots.acquire(timeout, c.ctx.Done()) {
		return true
	}
	if c.ctx.Err() == nil {
		c.s.met.rejected.WithLabelValues("busy").Inc()
	}
	return false
}

// numEngine is how many engine protocols lane replies are counted by;
// replyFLOCK, past them, counts the replies FLOCK sent
// (lane_replies_total{protocol="flock"}).
const (
	numEngine  = fastpath.NumProtocols
	replyFLOCK = numEngine
)
