package client

import (
	"context"

	"github.com/hatrpc/hatrpc/pkg/proto"
)

// RoutePicks reports how many times c picked a method's route (route.go):
// once per method unless the grant or the fast path's state changed.
func RoutePicks(c *Conn) uint64 { return c.routes.picks.Load() }

// FirstDown reports whether c's first connection is broken or draining
// (the next call dials it again).
func FirstDown(c *Conn) bool {
	s := c.cur.Load()
	return s == nil || s.down.Load()
}

// CallOnRetiredExtra makes a TCP call the way one does that picked an
// extra connection just before the extras were retired: the extra is
// retired (and, carrying no call, closed) between the pick and the call.
// false: c has no extra connection.
func CallOnRetiredExtra(ctx context.Context, c *Conn, m *Method, args, result proto.Struct) (bool, error) {
	p := c.spread.extra.Load()
	if p == nil || len(*p) == 0 {
		return false, nil
	}
	picked := (*p)[0]
	c.mu.Lock()
	c.retireSpreadLocked()
	c.mu.Unlock()
	req := request{m: m, args: args, sess: c.cur.Load()}
	return true, tcpRoute{c}.callOn(ctx, picked, req, result)
}

// StreamReadRole says who holds the read role of c's first connection
// (stream_read.go): "parked" with a server stream whose consumer reads
// for itself, "stream" (that consumer reading), "call" (a call's
// caller), "reader" (the reader goroutine) or "none" (nobody, no stream
// open).
func StreamReadRole(c *Conn) string {
	s := c.cur.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.reading && s.streams > 0:
		return "parked"
	case !s.reading:
		return "none"
	case s.streamLeader != nil:
		return "stream"
	case s.leader != nil:
		return "call"
	}
	return "reader"
}

// StreamSelfReads is how many stream frames their stream's consumer read
// for itself on c's first connection.
func StreamSelfReads(c *Conn) int64 {
	s := c.cur.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selfReads
}
