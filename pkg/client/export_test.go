package client

// RoutePicks reports how many times c picked a method's route (route.go):
// once per method unless the grant or the fast path's state changed.
func RoutePicks(c *Conn) uint64 { return c.routes.picks.Load() }

// FirstDown reports whether c's first connection is broken or draining
// (the next call dials it again).
func FirstDown(c *Conn) bool {
	s := c.cur.Load()
	return s == nil || s.down.Load()
}
