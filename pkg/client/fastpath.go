package client

import (
	"errors"
	"fmt"

	"github.com/hatrpc/hatrpc/pkg/fastpath"
	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/internal/transport"
)

// The rdma/shm fast path (lanes.go, flock.go, batch.go) is compiled only
// with cgo on Linux; elsewhere nofastpath.go stands in and a Conn speaks
// TCP only. This file is what both builds share.

// ErrNoFastPath matches (errors.Is) the error of Dial with WithRDMA("shm")
// or WithRDMA("ibv") in a binary built without the fast path
// (CGO_ENABLED=0, or not for Linux); WithRDMA("auto"), the default, then
// simply keeps every call on TCP.
var ErrNoFastPath = fastpath.ErrNotBuilt

// ErrPlanConflict matches (errors.Is) the error of a call whose function's
// client plan the server refused; the error names the function.
var ErrPlanConflict = fastpath.ErrPlanConflict

// LaneStats describes the lanes of one function of a Conn.
type LaneStats struct {
	Function  string // Service:name
	Transport string // shm or rdma
	Lanes     int    // open now
	// Requests counts the calls sent, by the engine protocol the plan
	// asked for at their size (an RF-RPC batch counts each of its calls;
	// "flock": through the shared FLOCK handle).
	Requests map[string]uint64
	// Sent counts the messages the function's lanes sent, open and
	// closed ones, by the protocol the engine actually used: a hybrid
	// request as eager or write_rndv by its size, one too large for its
	// protocol's buffer as write_rndv (rdma.EndpointStats.SentByProtocol).
	Sent map[string]uint64
}

// RouteStats counts the calls a Conn sent, by route (docs/design/lanes.md):
// over its TCP connections, on lanes of their function, or through the
// process's FLOCK handle. A retried call counts each attempt; lane and
// FLOCK calls are counted while the Conn is open.
type RouteStats struct {
	TCP   uint64 // HatRPC or plain Thrift over TCP (or a unix socket, or HTTP)
	Lane  uint64 // on lanes (an RF-RPC batch counts each of its calls)
	FLOCK uint64 // through the shared FLOCK handle
}

// RouteStats reports the calls the Conn sent so far, by route.
func (c *Conn) RouteStats() RouteStats {
	r := c.lanes.routeStats()
	r.TCP = c.tcpSent.Load()
	return r
}

// errNoLane sends a call to TCP: lanes are off for this Conn.
var errNoLane = errors.New("client: no lane")

// ErrBadProvider matches (errors.Is) the error of Dial with a WithRDMA
// provider name other than off, auto, shm and ibv.
var ErrBadProvider = fastpath.ErrBadProvider

// checkBuilt fails a Conn that insists on a provider this binary lacks.
func checkBuilt(provider string) error {
	if _, err := fastpath.ParseProvider(provider); err != nil {
		return fmt.Errorf("client: WithRDMA(%q): %w", provider, err)
	}
	if tr := transport.OfProvider(provider); tr != hints.TransportAuto && !fastpath.Built() {
		return &SetupError{Op: "lane", Transport: tr.String(), Err: ErrNoFastPath}
	}
	return nil
}

// checkRDMAChoice parses the device/GID override (options, then the
// environment) into o.rdmaSpec and checks that the device, port and GID it
// names exist, so that a wrong one fails Dial listing what does.
func checkRDMAChoice(o *options) error {
	if o.rdma == transport.ProviderOff || o.rdma == transport.ProviderSHM {
		return nil
	}
	sp, err := fastpath.RDMASpecFromEnv(o.rdmaDevice, o.rdmaGID)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	o.rdmaSpec = sp
	if sp == (fastpath.RDMASpec{}) || !fastpath.Built() {
		return nil
	}
	if _, err := (fastpath.Selector{Spec: sp}).ForLocal(nil); err != nil {
		return fmt.Errorf("client: WithRDMADevice/WithRDMAGID: %w", err)
	}
	return nil
}
