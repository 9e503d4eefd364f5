//go:build !cgo || !linux

package client

import (
	"sync"
	"time"

	"github.com/hatrpc/hatrpc/pkg/wire"
)

// Without the fast path (no cgo, or not Linux) a Conn offers no lanes in
// its handshake, so a server grants none and every call goes over TCP.

// lanes keeps what fallback.go reads: lanes are never on.
type lanes struct {
	c   *Conn
	mu  sync.Mutex
	off error
}

type sharedFlock struct{}

func (c *Conn) laneOffer() uint64 { return 0 }

// pickRoute: no session has a fast path here, so nothing asks; TCP.
func (c *Conn) pickRoute(*session, *Method) (route, time.Time, error) {
	return tcpRoute{c}, time.Time{}, nil
}

func (ls *lanes) generation() uint64 { return 0 }

func (c *Conn) planChecks() []wire.Attach { return nil }

func (c *Conn) releaseFlock() {}

func (ls *lanes) close() {}

func (ls *lanes) fallBack(err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.off == nil {
		ls.off = err
		return true
	}
	return false
}

func isBadPeer(error) bool { return false }

// routeStats: no call runs on lanes or FLOCK in this build.
func (ls *lanes) routeStats() RouteStats { return RouteStats{} }

// LaneStats is empty: no call runs on lanes in this build.
func (c *Conn) LaneStats() []LaneStats { return nil }
