//go:build cgo && linux

package server

import (
	"context"
	"net"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
)

// device returns the server's verbs device for a connection that arrived
// on local (a listener on 0.0.0.0 gets each client on the device that
// received it), for a handler with numa hint numa (where several devices
// carry the address, the one on its node), opening it on first use; nil
// when lanes are off or the provider cannot be opened (then those clients
// stay on TCP, and the failure is logged once).
func (s *Server) device(local net.Addr, numa hints.NUMA) *fastpath.Device {
	if s.opts.rdma == "" {
		return nil
	}
	var ip net.IP
	if ta, ok := local.(*net.TCPAddr); ok {
		ip = ta.IP
	}
	key := ip.String()
	if _, ok := numa.Node(); ok {
		key += " numa=" + numa.String()
	}
	s.devMu.Lock()
	defer s.devMu.Unlock()
	if d := s.devs[key]; d != nil || s.devFailed[key] || s.closedForLanes {
		return d
	}
	d, err := fastpath.AcquireFor(context.Background(), s.opts.rdma, fastpath.Target{Spec: s.rdmaSpec, Local: ip, NUMA: numa})
	if err != nil {
		if s.devFailed == nil {
			s.devFailed = map[string]bool{}
		}
		s.devFailed[key] = true
		s.log.Warn("hatrpc: rdma/shm lanes unavailable; serving TCP only", "provider", s.opts.rdma, "local", key, "err", err)
		return nil
	}
	s.guardProcess(d.Provider())
	if s.devs == nil {
		s.devs = map[string]*fastpath.Device{}
	}
	s.devs[key] = d
	if ch := d.Choice; ch != nil {
		s.log.Info("hatrpc: lanes enabled", "provider", d.Provider(), "local", key, "device", ch.Device,
			"port", ch.Port, "gid_index", ch.GIDIndex, "gid", ch.GID, "gid_type", ch.Type, "why", ch.Why)
	} else {
		s.log.Info("hatrpc: lanes enabled", "provider", d.Provider())
	}
	return d
}

// releaseDevice drops the devices once no lane can use them any more.
func (s *Server) releaseDevice() {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	s.closedForLanes = true
	for k, d := range s.devs {
		d.Release()
		delete(s.devs, k)
	}
}
