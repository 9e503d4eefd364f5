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
	m := s.lookup([]byte(method))
	if m != nil {
		set, reqSize = m.set, m.reqSize
	}
	if m != nil && m.m.Stream != stream.None {
		return hints.TableFor(set, hints.Env{Side: hints.SideServer, Transport: tr,
			Cores: runtime.NumCPU(), PeerPayload: reqSize, Stream: m.m.Stream})
	}
	return serverTable(set, reqSize, tr)
}

// serverTable builds the server side's table of a function on transport
// tr, sized for the client's declared requests: the one place the server's
// reply protocol is decided.
func serverTable(set hints.Set, reqSize int, tr hints.Transport) hints.Table {
	return hints.TableFor(set, hints.Env{Side: hints.SideServer, Transport: tr, Cores: runtime.NumCPU(), PeerPayload: reqSize})
}
