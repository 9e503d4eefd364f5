//go:build !cgo || !linux

package server

import (
	"fmt"
	"net"

	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Without the fast path (no cgo, or not Linux) the server grants no lanes
// in the handshake, so no connection ever becomes one.

type lane struct{ tr uint8 }

type flockState struct{}

func (s *Server) laneCaps(*wire.Hello, net.Addr) uint64 { return 0 }

// grantLane refuses every attach as lanes.go does one for lanes it did not
// grant.
func (c *conn) grantLane(h *wire.Hello, _ uint64) (*lane, *proto.ApplicationException) {
	return nil, proto.NewApplicationException(proto.ExcUnsupportedClientType,
		fmt.Sprintf("hatrpc: no %q lanes for this client", h.Attach.Transport))
}

// grantCancel is never asked: grantLane grants no lane.
func (l *lane) grantCancel(*wire.Hello) uint64 { return 0 }

// checkPlans: with no lane granted, every function runs over TCP, which
// every plan accepts.
func (s *Server) checkPlans(*wire.Hello, uint64) (string, string) { return "", "" }

// laneSession never exists here: grantLane refuses every attach.
type laneSession struct {
	c *conn
	l *lane
}

// maxReplyBody is never asked: no stream is on a lane.
func (ls *laneSession) maxReplyBody() int { return ls.c.s.opts.limits.MaxMessageSize }

// engineProtocolName is never asked: no lane replies without lanes.
func engineProtocolName(i int) string { return fmt.Sprint(i) }

func (ls *laneSession) serve()   {}
func (ls *laneSession) stop()    {}
func (s *Server) cancelFlock()   {}
func (s *Server) closeFlock()    {}
func (s *Server) releaseDevice() {}
