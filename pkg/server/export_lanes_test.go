//go:build cgo && linux

package server

import (
	"net"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// LaneCaller runs calls through a dedicated lane session's call path,
// metered like a served lane's, without an engine (no endpoint, no
// poller): what the server's Go code costs per lane call, for benchmarks
// and allocation counts. close ends it.
func LaneCaller(s *Server) (call func(req []byte) []byte, close func()) {
	return laneCaller(s, false)
}

// SharedLaneCaller is LaneCaller on a shared (FLOCK) lane, whose calls
// take pooled requests and replies of their own.
func SharedLaneCaller(s *Server) (call func(req []byte) []byte, close func()) {
	return laneCaller(s, true)
}

func laneCaller(s *Server, shared bool) (call func(req []byte) []byte, close func()) {
	a, b := net.Pipe()
	c := newConn(s, a)
	l := &lane{fn: "echo", tr: trSHM, stop: make(chan struct{}), shared: shared,
		in:  s.met.bytesIn.WithLabelValues(transportNames[trSHM]),
		out: s.met.bytesOut.WithLabelValues(transportNames[trSHM])}
	if !shared { // counted as serve counts a dedicated lane's calls
		l.meter = s.laneMeters.add(trSHM)
	}
	ls := &laneSession{c: c, l: l, codec: wire.GetCodec()}
	return func(req []byte) []byte {
			out, _ := ls.call(req)
			return out
		}, func() {
			if l.meter != nil {
				s.laneMeters.retire(l.meter)
			}
			c.cancel()
			a.Close()
			b.Close()
		}
}

// NeverBlocks is the FLOCK dispatcher's test of a request frame (flock.go).
func NeverBlocks(s *Server, req []byte) bool { return s.neverBlocks(req) }
