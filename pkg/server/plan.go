package server

import (
	"runtime"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/stream"
)

// Plan returns the plan table the server answers method ("Service:name",
// or a bare name) by on transport tr (tcp, shm or rdma: what the client's
// session was granted): the rows give each reply size's route and engine
// protocol, as hatgen explain prints them for the server side. A function
// the server does not serve gets the defaults' table.
func (s *Server) Plan(method string, tr hints.Transport) hints.Table {
	var set hints.Set
	var reqSize int
	var mode stream.Mode
	if m := s.lookup([]byte(method)); m != nil {
		set, reqSize, mode = m.set, m.reqSize, m.m.Stream
	}
	return serverTable(set, reqSize, tr, mode)
}

// serverTable builds the server side's table of a function on transport
// tr, sized for the client's declared requests (a stream's by its mode):
// the one place the server's reply protocol is decided, for its lanes and
// Plan alike.
func serverTable(set hints.Set, reqSize int, tr hints.Transport, mode stream.Mode) hints.Table {
	return hints.TableFor(set, hints.Env{Side: hints.SideServer, Transport: tr, Cores: runtime.NumCPU(), PeerPayload: reqSize, Stream: mode})
}
