package server

import (
	"context"
	"net"
	"sync"
)

// Registrar announces a server in a service registry, so that clients
// watching the registry (cluster.Watcher) find it. pkg/cluster/etcd has
// one for etcd; Consul (agent service with a TTL check), ZooKeeper (an
// ephemeral node) and Nacos (an ephemeral instance) fit the same two
// calls.
type Registrar interface {
	// Register announces addr (a listener's address) and keeps it
	// announced until Deregister. Serve calls it before accepting, so it
	// must not wait for the registry: one that is unreachable is retried
	// in the background. An error says addr can never be announced
	// (Serve closes the listener and returns it).
	Register(ctx context.Context, addr string) error
	// Deregister withdraws every address Register announced. Close
	// passes a context without a deadline: Deregister bounds its own
	// wait for an unreachable registry.
	Deregister(ctx context.Context) error
}

// WithRegistrar announces every listener Serve is given through r, and
// withdraws them at the start of Shutdown (before connections drain, so
// clients stop sending new calls first) or Close.
func WithRegistrar(r Registrar) Option { return func(o *options) { o.registrar = r } }

// registration is a server's use of its Registrar: Register is not
// called once the server has withdrawn, and Deregister runs once.
type registration struct {
	r      Registrar
	ctx    context.Context // ends when the server withdraws
	cancel context.CancelFunc
	mu     sync.Mutex
	done   bool
}

func newRegistration(r Registrar) *registration {
	if r == nil {
		return nil
	}
	g := &registration{r: r}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

func (g *registration) register(ln net.Listener) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return ErrServerClosed
	}
	return g.r.Register(g.ctx, ln.Addr().String())
}

func (s *Server) deregister(ctx context.Context) {
	g := s.registration
	if g == nil {
		return
	}
	g.cancel() // a Register still running gives up
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return
	}
	g.done = true
	if err := g.r.Deregister(ctx); err != nil {
		s.log.Warn("hatrpc: deregistering the server failed", "err", err)
	}
}
