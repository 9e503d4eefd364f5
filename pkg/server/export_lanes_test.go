//go:build cgo && linux

package server

import (
	"net"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// LaneCaller runs calls through a dedicated lane session's call path,
// metered like a served lane's, without an engine (no endpoint, no
// poller): what the server's Go code costs per lane call, for benchmarks
// and allocation counts. close ends it.
func LaneCaller(s *Server) (call func(req []byte) []byte, close func()) {
	call, _, close = laneCaller(s, false, false)
	return call, close
}

// HeadLaneCaller is LaneCaller that also tells whether a request has
// the head the lane learned from its last plain call (lanehead.go):
// known asks without calling.
func HeadLaneCaller(s *Server) (call func(req []byte) []byte, known func(req []byte) bool, close func()) {
	return laneCaller(s, false, false)
}

// FullLaneCaller is LaneCaller whose lane forgets every head it learns:
// each call takes the full path.
func FullLaneCaller(s *Server) (call func(req []byte) []byte, close func()) {
	call, _, close = laneCaller(s, false, true)
	return call, close
}

// SplitLaneCaller is LaneCaller with what a served lane does once the
// reply is out (rdma.AfterReply) left to the test: call returns the reply,
// after ends the call.
func SplitLaneCaller(s *Server) (call func(req []byte) []byte, after, close func()) {
	ls, close := testLane(s, false)
	return func(req []byte) []byte {
		out, _ := ls.call(req)
		return out
	}, ls.afterReply, close
}

// FLOCKCaller is LaneCaller on the FLOCK session, whose calls
// take pooled requests and replies of their own.
func FLOCKCaller(s *Server) (call func(req []byte) []byte, close func()) {
	call, _, close = laneCaller(s, true, false)
	return call, close
}

// FLOCKCallerInto is FLOCKCaller as FLOCK calls it: each
// reply is encoded into dst if large enough (FLOCK's storage for the
// response, see pkg/flock's AppendHandler).
func FLOCKCallerInto(s *Server) (call func(req, dst []byte) []byte, close func()) {
	ls, close := testLane(s, true)
	return ls.callFLOCK, close
}

func laneCaller(s *Server, viaFLOCK, forget bool) (call func(req []byte) []byte, known func(req []byte) bool, close func()) {
	ls, close := testLane(s, viaFLOCK)
	return func(req []byte) []byte {
			if forget {
				ls.head = reqHead{bytes: ls.head.bytes[:0]} // no allocation to learn it again
			}
			out, _ := ls.call(req)
			ls.afterReply() // as ServeCalls runs it (rdma.AfterReply)
			return out
		}, func(req []byte) bool {
			_, _, ok := ls.knownHead(req, s.opts.limits.MaxMessageSize)
			return ok
		}, close
}

// testLane is a lane session of a connection to s over a pipe (the
// FLOCK session's kind if viaFLOCK).
func testLane(s *Server, viaFLOCK bool) (*laneSession, func()) {
	a, b := net.Pipe()
	c := newConn(s, a)
	s.budget.markFastPath(c) // as serve does
	l := &lane{fn: "echo", tr: trOf(hints.TransportSHM), stop: make(chan struct{}), viaFLOCK: viaFLOCK,
		in:  s.met.bytesIn.WithLabelValues(transportNames[trOf(hints.TransportSHM)]),
		out: s.met.bytesOut.WithLabelValues(transportNames[trOf(hints.TransportSHM)])}
	if !viaFLOCK { // counted as serve counts a dedicated lane's calls
		l.meter = s.laneMeters.add(trOf(hints.TransportSHM), laneEngine{})
	}
	ls := &laneSession{c: c, l: l, codec: wire.GetCodec()}
	return ls, func() {
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
