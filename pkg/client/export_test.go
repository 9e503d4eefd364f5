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
