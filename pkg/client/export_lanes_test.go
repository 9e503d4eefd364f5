//go:build cgo && linux

package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/hints"
	"github.com/hatrpc/hatrpc/pkg/proto"
	"github.com/hatrpc/hatrpc/pkg/wire"
)

// TestLane is a lane of a Conn with default options: enough to decode
// replies (lanereply.go).
type TestLane struct{ l *clane }

func NewTestLane() *TestLane {
	return &TestLane{&clane{p: &lanePool{ls: &lanes{c: &Conn{o: defaultOptions()}}}}}
}

// Decode decodes resp as a lane does; DecodeFull by the full path.
func (t *TestLane) Decode(resp []byte, result proto.Struct, alias bool) error {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	return t.l.decodeReply(context.Background(), codec, resp, result, binaries(alias))
}

func (t *TestLane) DecodeFull(resp []byte, result proto.Struct, alias bool) error {
	codec := wire.GetCodec()
	defer wire.PutCodec(codec)
	return t.l.p.ls.c.decodeFrame(context.Background(), "lane", codec, resp, result, binaries(alias))
}

// Head is the reply head the lane learned; Shortcut tells whether resp
// would skip the full parse.
func (t *TestLane) Head() []byte { return t.l.head }

func (t *TestLane) Shortcut(resp []byte) bool {
	_, _, ok := t.l.replyBody(resp, t.l.p.ls.c.o.limits.MaxMessageSize)
	return ok
}

func (t *TestLane) SetMaxMessage(n int) { t.l.p.ls.c.o.limits.MaxMessageSize = n }

// BlockedLaneWaits counts c's lanes whose waits block at once (first
// lanes of client and bidirectional streams, stream_lane.go).
func BlockedLaneWaits(c *Conn) int {
	return countLanes(c, func(l *clane) bool { return l.ep.WaitsBlocked() })
}

// poolsOf is c's lane pools, taken under the Conn's lock.
func poolsOf(c *Conn) []*lanePool {
	ls := &c.lanes
	ls.mu.Lock()
	defer ls.mu.Unlock()
	pools := make([]*lanePool, 0, len(ls.pools))
	for _, p := range ls.pools {
		pools = append(pools, p)
	}
	return pools
}

// countLanes counts c's lanes, busy or idle, for which count is true: the
// pools are taken under the Conn's lock, each pool's lanes under its own.
func countLanes(c *Conn, count func(*clane) bool) int {
	n := 0
	for _, p := range poolsOf(c) {
		p.mu.Lock()
		for l := range p.all {
			if count(l) {
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// LaneDevice opens (or finds) the Conn's shared device for tr as a new
// lane would.
func (c *Conn) LaneDevice(tr hints.Transport) error {
	_, err := c.lanes.device(tr)
	return err
}

// LentStreamMsgs counts the stream messages c's lanes lent in place
// (borrowed ones, read in the lane's reply) instead of copying them out.
func LentStreamMsgs(c *Conn) uint64 { return c.lanes.streamRoutes.lent.Load() }

// CallerExchanges counts the lane exchanges server streams' callers ran
// in their RecvMsg (stream_lanedrive.go).
func CallerExchanges(c *Conn) uint64 { return c.lanes.streamRoutes.driven.Load() }

// LaneTurn is whose turn a server stream's next lane exchange is:
// "runner", "offered" (the caller's next RecvMsg may take it) or
// "caller" (its RecvMsg runs it); "" for a stream that lends nothing.
func LaneTurn(st Stream) string {
	cs, ok := st.(*clientStream)
	if !ok || cs.laneDrv == nil {
		return ""
	}
	return [...]string{"runner", "offered", "caller"}[cs.laneDrv.drive.Load()]
}

// LeasedStreamRequests counts the second lanes' requests sent from the
// staging memory SendMsg wrote into (upRunner.nextLease).
func LeasedStreamRequests(c *Conn) uint64 { return c.lanes.streamRoutes.leased.Load() }

// LanesOpen counts c's lanes, busy or idle.
func LanesOpen(c *Conn) int { return countLanes(c, func(*clane) bool { return true }) }

// LaneSetups counts the lanes c set up so far.
func LaneSetups(c *Conn) uint64 {
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	return c.lanes.setups
}

// LaneCancels counts c's canceled streams on lanes whose first lane went
// back to the pool after the server's acknowledgement (kept) and those
// whose lane was closed.
func LaneCancels(c *Conn) (kept, closed uint64) {
	return c.lanes.streamRoutes.kept.Load(), c.lanes.streamRoutes.closed.Load()
}

// HangStreamCancels makes a canceled stream on lanes act as if the server
// never acknowledged it: no Cancel on the link, and polls the server
// holds in place of the reset.
func HangStreamCancels() Option { return func(o *options) { o.streams.hangCancels = true } }

// LateCancelWatch makes a lane stream's cancel watcher never run, as when
// its goroutine has not been scheduled yet: only what the client does next
// can start the cancel.
func LateCancelWatch() Option { return func(o *options) { o.streams.lateWatch = true } }

// WithoutLaneCancel makes the Conn's lanes offer no wire.CapLaneCancel in
// their hellos: their server then grants it not, as a server of the
// previous version, and takes a cancel on a lane's link for the client
// gone (it closes the lane).
func WithoutLaneCancel() Option { return func(o *options) { o.streams.noLinkCancel = true } }

// StreamsPolling counts c's streams on lanes whose (first) lane has a
// poll out, or about to go: a cancel then finds it held.
func StreamsPolling(c *Conn) int {
	n := 0
	for _, p := range poolsOf(c) {
		p.smu.Lock()
		for r := range p.live {
			r.cmu.Lock()
			if r.polling {
				n++
			}
			r.cmu.Unlock()
		}
		p.smu.Unlock()
	}
	return n
}
