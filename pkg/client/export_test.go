package client

// RoutePicks reports how many times c picked a method's route (route.go):
// once per method unless the grant or the fast path's state changed.
func RoutePicks(c *Conn) uint64 { return c.routes.picks.Load() }
