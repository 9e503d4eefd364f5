package cluster

import "context"

// Watcher is a Resolver that pushes changes as they happen, as a registry
// (etcd, Consul, ZooKeeper, Nacos) can, where a static list or DNS can
// only be asked again. A Client whose Resolver is a Watcher resolves it
// once at Dial, then runs Watch until Close instead of asking every
// WithRefresh.
type Watcher interface {
	Resolver
	// Watch calls update with the whole address list: first the current
	// one, then after every change, never two calls at once. While the
	// registry is unreachable it does not call update, so the Client
	// keeps the servers it knows. It returns when ctx ends, or earlier
	// only when it can never watch again; the Client then asks Resolve
	// every WithRefresh, as for any Resolver.
	Watch(ctx context.Context, update func(addrs []string)) error
}

// discover keeps the server list current for the Client's life: by
// Watch when the Resolver pushes, else by asking it every refresh.
func (c *Client) discover(ctx context.Context) {
	if w, ok := c.r.(Watcher); ok {
		w.Watch(ctx, func(addrs []string) {
			// An empty list keeps the servers known, as a failed
			// refresh does: a registry wiped by mistake must not take
			// a working service away from its clients.
			if addrs = normalize(addrs); len(addrs) > 0 {
				c.setServers(addrs)
			}
		})
		if ctx.Err() != nil {
			return
		}
	}
	if c.o.refresh > 0 {
		c.refreshLoop(ctx)
	}
}
